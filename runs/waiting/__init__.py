"""Runs waiting on the world: external events delivered to the run that waits for
them (or kept for the run that will), and schedules that start a workflow on a cron expression
or a fixed interval.
"""
