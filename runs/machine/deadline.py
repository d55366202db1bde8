"""A call of workflow code that outlives its lease is interrupted where it is.

Without heartbeats (the prefork and solo pools, the default) a run's lease is the longest a
call may take: past it the sweeper gives the run to another worker. A call that never ends
(a receiver that drips its answer a byte at a time, each within the client's read timeout;
step code caught in a loop) would hold its worker process for ever, and one more with each
take-back, until the pool has none left. So while the executor advances a run, each call of
workflow code (a step, a tool, an undo, a lookup, a model turn) runs under a timer at
4/5 of the lease; when it rings the call is interrupted with DeadlinePassed, an unknown
outcome (it may have acted: settled by key; a read is simply tried again), recorded by
this worker before its lease ends, and the worker goes on.

A step that heartbeats (ctx.heartbeat(), for a step known to be long) renews its deadline
with its lease. A timer signal reaches the main thread only: in the threads mode of a
worker heartbeats keep the leases alive instead (RUNS_HEARTBEAT_SECONDS), for
RUNS_CALL_LIMIT_SECONDS of one call at most (runs.machine.heartbeats), and nothing is
armed. Nor is anything armed outside the executor (a person's lookup from the console)."""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings

from .errors import UnknownOutcome

SHARE_OF_LEASE = 0.8

# The deadline of each call while the executor advances a run in the main thread (0: none),
# and the call running now (named in the error; its timer renewed by a heartbeat).
_armed: ContextVar[float] = ContextVar("deadline_armed", default=0.0)
_calling: ContextVar[str] = ContextVar("deadline_calling", default="")


class DeadlinePassed(UnknownOutcome):
    """A call of workflow code still running at its deadline, interrupted there."""


def seconds() -> float:
    """How long one call may run; 0 when heartbeats keep the lease alive instead."""
    if settings.RUNS_HEARTBEAT_SECONDS > 0:
        return 0.0
    return settings.RUNS_LEASE_SECONDS * SHARE_OF_LEASE


def hard_limit_problem(time_limit: float | None) -> str | None:
    """Why a worker's hard time limit (celery worker --time-limit, task_time_limit) would
    cut the calls the runtime lets run, or None. Past it the pool process is killed, its
    run taken back when its lease ends and the call settled by key; a limit no longer than
    one call may rightly run cuts that call again at each take-back, until the run waits
    for a person (workers_keep_stopping)."""
    if not time_limit:
        return None
    if settings.RUNS_HEARTBEAT_SECONDS > 0:
        name, longest = "RUNS_CALL_LIMIT_SECONDS", settings.RUNS_CALL_LIMIT_SECONDS
        allowed = f"{longest:g} s (heartbeats on; longer for a step that heartbeats itself)"
    else:
        name, longest = "RUNS_LEASE_SECONDS", settings.RUNS_LEASE_SECONDS
        allowed = f"{longest * SHARE_OF_LEASE:g} s ({SHARE_OF_LEASE:.0%} of its lease)"
    if time_limit > longest:
        return None
    return (f"--time-limit (task_time_limit) {time_limit:g} s is not above {name} "
            f"({longest:g} s): it would kill a pool process in a call the runtime lets run "
            f"{allowed}, and again at each take-back. Set it above {name}, or leave it "
            "unset: the runtime bounds each call itself")


@contextmanager
def calls_bounded() -> Iterator[None]:
    """Within the block (the executor advancing one run) each `bounded` call is armed, when
    this is the main thread. The signal handler is installed once here, not at each call:
    a step's own cost stays two timer settings."""
    limit = seconds()
    if limit <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGALRM, _ring)
    token = _armed.set(limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _armed.reset(token)
        signal.signal(signal.SIGALRM, previous)


def _ring(signum, frame):
    what = _calling.get()
    if not what:  # rang between two calls: nothing of workflow code to interrupt
        return
    raise DeadlinePassed(f"{what} still running after {_armed.get():g} s "
                         f"({SHARE_OF_LEASE:.0%} of its lease): interrupted there; it may have "
                         "acted")


@contextmanager
def bounded(what: str) -> Iterator[None]:
    """Run the block (one call of workflow code) under the deadline, where one is armed.
    The caller catches DeadlinePassed with the call's other exceptions: the timer may also
    ring just after the call returned, and then the call counts as unknown, which is safe."""
    limit = _armed.get()
    if limit <= 0:
        yield
        return
    calling = _calling.set(what)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _calling.reset(calling)


def renew() -> None:
    """The call running now extended its lease (a heartbeat): its deadline starts again."""
    if _calling.get():
        signal.setitimer(signal.ITIMER_REAL, _armed.get())
