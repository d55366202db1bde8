"""Crash and failure points at step boundaries, for crash tests and the drill kit.

RUNS_CRASH_AT, in the environment a process starts with, names one point as
"<where>:<step name>", where is one of before_call (after the intent is committed, before
the call) or after_call (after the call returned, before its outcome is committed); a
compensation's points are named "<where>:<step>:compensate".
When a worker reaches it, it writes RUNS_CRASH_MARKER (if set) and then waits forever, so
that a test can kill it with SIGKILL at exactly that point. With RUNS_CRASH_MODE=self the
worker sends SIGKILL to itself instead. Unset, nothing happens.

failing(step) makes the executor of this process treat the step's next calls as refused
permanently without calling it: a late failure for the compensation drill.
"""

import os
import signal
import time
from contextlib import contextmanager

BEFORE_CALL = "before_call"
AFTER_CALL = "after_call"
# Within a write, after its first part is written ("mid_write:archive_file": an archive
# file's, archive.writing).
MID_WRITE = "mid_write"
# A file saved under its name, before the row that records it is committed
# ("saved:archive_file", archive.archiving).
SAVED = "saved"

_failing: set[str] = set()
# Read once: a point is armed in the environment a process starts with (the crash tests'
# and the drills' child processes), and a worker passes two points at every step.
_ARMED_AT = os.environ.get("RUNS_CRASH_AT", "")


def reach(where: str, step_name: str) -> None:
    target = _ARMED_AT
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


def injected_failure(step_name: str) -> bool:
    return step_name in _failing


@contextmanager
def failing(step_name: str):
    """Within the block, calls of `step_name` in this process fail permanently."""
    _failing.add(step_name)
    try:
        yield
    finally:
        _failing.discard(step_name)
