"""Crash points at step boundaries, for crash tests and the drill kit.

RUNS_CRASH_AT names one point as "<where>:<step name>", where is one of before_call (after
the intent is committed, before the call) or after_call (after the call returned, before
its outcome is committed). When a worker reaches it, it writes RUNS_CRASH_MARKER (if set)
and then waits forever, so that a test can kill it with SIGKILL at exactly that point.
With RUNS_CRASH_MODE=self the worker sends SIGKILL to itself instead. Unset, nothing happens.
"""

import os
import signal
import time

BEFORE_CALL = "before_call"
AFTER_CALL = "after_call"


def reach(where: str, step_name: str) -> None:
    target = os.environ.get("RUNS_CRASH_AT")
    if not target or target != f"{where}:{step_name}":
        return
    marker = os.environ.get("RUNS_CRASH_MARKER")
    if marker:
        with open(marker, "w") as f:
            f.write(f"{os.getpid()} {target}\n")
    if os.environ.get("RUNS_CRASH_MODE") == "self":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:
        time.sleep(60)
