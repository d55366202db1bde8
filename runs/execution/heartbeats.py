"""One heartbeat for all the steps a worker process holds in flight.

A step waiting on a remote system cannot heartbeat itself. In the threads mode of a worker
(docs/operations.md) one process holds hundreds of such steps: each is registered here for
the length of its call, and one thread extends every registered lease in one transaction each
RUNS_HEARTBEAT_SECONDS (transitions.heartbeat_many), instead of a statement per step. Fencing
is untouched: a lease is extended only while its token matches, so one the sweeper took back
stays taken, and the step's outcome is then kept as a late result. A step is registered only
during its call, which the step's own timeout bounds: a process that is alive but whose call
hangs does not keep its lease beyond that.

Off (0) by default: one step per process, as the prefork pool runs them, is covered by a
lease longer than its call.
"""

import logging
import threading
from contextlib import contextmanager

from django.conf import settings
from django.db import connection

from ..machine import transitions

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_held: dict[int, int] = {}  # run id -> fencing token, of the steps in their call
_beating: threading.Thread | None = None


@contextmanager
def held(lease: transitions.Lease):
    """Keep `lease` alive while the body (the remote call) runs."""
    interval = settings.RUNS_HEARTBEAT_SECONDS
    if interval <= 0:
        yield
        return
    _start(interval)
    with _lock:
        _held[lease.run.pk] = lease.token
    try:
        yield
    finally:
        with _lock:
            if _held.get(lease.run.pk) == lease.token:
                del _held[lease.run.pk]


def beat() -> int:
    """Extend every registered lease now; returns how many were extended."""
    with _lock:
        tokens = dict(_held)
    try:
        return transitions.heartbeat_many(tokens)
    finally:
        # The pool's connection goes back at once (without a pool, this thread's own
        # connection is closed: a beat every few seconds does not need a session kept).
        connection.close()


def _start(interval: float) -> None:
    global _beating
    with _lock:
        if _beating is not None and _beating.is_alive():
            return
        _beating = threading.Thread(target=_loop, args=(interval,), name="lease-heartbeat",
                                    daemon=True)
        _beating.start()


def _loop(interval: float) -> None:
    stop = threading.Event()
    while not stop.wait(interval):
        try:
            beat()
        except Exception:
            # The next beat tries again; a lease that runs out meanwhile is taken back and
            # settled by key like any other.
            logger.warning("lease heartbeat failed", exc_info=True)
