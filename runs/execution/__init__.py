"""Advancing runs: the executor that takes a run's lease and runs its steps with a
checkpoint around every call (the heartbeat that keeps the leases of the calls in flight is
runs.machine.heartbeats, which agent steps use too), and the sweeper that takes back expired
leases and sends wake-up hints for runs that are due.
"""
