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
worker heartbeats keep the leases alive instead (RUNS_HEARTBEAT_SECONDS), and nothing is
armed. Nor is anything armed outside the executor (a person's lookup from the console)."""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings

from .errors import UnknownOutcome

SHARE_OF_LEASE = 0.8

_armed: ContextVar[bool] = ContextVar("deadline_armed", default=False)
# The timer of the call running now in the main thread, renewed by a heartbeat.
_running: ContextVar[float] = ContextVar("deadline_running", default=0.0)


class DeadlinePassed(UnknownOutcome):
    """A call of workflow code still running at its deadline, interrupted there."""


@contextmanager
def calls_bounded() -> Iterator[None]:
    """Within the block (the executor advancing one run) each `bounded` call is armed."""
    token = _armed.set(True)
    try:
        yield
    finally:
        _armed.reset(token)


def seconds() -> float:
    """How long one call may run; 0 when heartbeats keep the lease alive instead."""
    if settings.RUNS_HEARTBEAT_SECONDS > 0:
        return 0.0
    return settings.RUNS_LEASE_SECONDS * SHARE_OF_LEASE


@contextmanager
def bounded(what: str) -> Iterator[None]:
    """Run the block (one call of workflow code) under the deadline, where one can be armed.
    The caller catches DeadlinePassed with the call's other exceptions: the timer may also
    ring just after the call returned, and then the call counts as unknown, which is safe."""
    limit = seconds()
    if (not _armed.get() or limit <= 0
            or threading.current_thread() is not threading.main_thread()):
        yield
        return

    def ring(signum, frame):
        raise DeadlinePassed(f"{what} still running after {limit:g} s ({SHARE_OF_LEASE:.0%} of "
                             "its lease): interrupted there; it may have acted")

    previous = signal.signal(signal.SIGALRM, ring)
    running = _running.set(limit)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        _running.reset(running)
        signal.signal(signal.SIGALRM, previous)


def renew() -> None:
    """The call running now extended its lease (a heartbeat): its deadline starts again."""
    limit = _running.get()
    if limit > 0 and threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, limit)
