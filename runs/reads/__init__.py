"""Reads for the console and the API: the runs and attention lists and a run's
detail in a fixed number of queries, an agent step's conversation and tool calls, a run's
attempt generations, and the worker registry.
"""
