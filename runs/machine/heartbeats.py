"""One heartbeat for all the steps a worker process holds in flight.

A step waiting on a remote system cannot heartbeat itself. In the threads mode of a worker
(docs/operations.md) one process holds hundreds of such steps: each is registered here for
the length of its call, and one thread extends every registered lease in one transaction each
RUNS_HEARTBEAT_SECONDS (transitions.heartbeat_many), instead of a statement per step. Fencing
is untouched: a lease is extended only while its token matches, so one the sweeper took back
stays taken, and the step's outcome is then kept as a late result. A step is registered only
during its call, and for RUNS_CALL_LIMIT_SECONDS at most: a call that never ends (a receiver
dripping its answer within each read timeout, code caught in a loop) cannot be interrupted
in a thread (runs.machine.deadline does that in the main thread), so its lease is no longer
extended; the sweeper takes the run back and the call is settled by key like any other
whose worker went silent. A step that calls ctx.heartbeat() shows it is alive, and its limit
starts again.

Off (0) by default: one step per process, as the prefork pool runs them, is covered by a
lease longer than its call.
"""

import logging
import threading
import time
from contextlib import contextmanager

from django.conf import settings
from django.db import DatabaseError, connection

from .. import store
from ..store import read_only
from . import transitions

logger = logging.getLogger(__name__)

_lock = threading.Lock()
# run id -> (fencing token, monotonic time its call's lease stops being extended), of the
# steps in their call
_held: dict[int, tuple[int, float]] = {}
_beating: threading.Thread | None = None


@contextmanager
def held(lease: transitions.Lease):
    """Keep `lease` alive while the body (the remote call) runs."""
    interval = settings.RUNS_HEARTBEAT_SECONDS
    if interval <= 0:
        yield
        return
    _start(interval)
    renew(lease)
    try:
        yield
    finally:
        with _lock:
            if _held.get(lease.run.pk, (None,))[0] == lease.token:
                del _held[lease.run.pk]


@contextmanager
def calling(lease: transitions.Lease):
    """The body calls another system for the run `lease` holds: a step's or a tool's call, a
    lookup by key, a model turn, an undo. Every such call goes through here, so that none
    holds a pooled connection the threads beside it need (release_connection) or lets its
    lease run out in the threads mode (held)."""
    release_connection()
    with held(lease):
        yield


def release_connection() -> None:
    """Give this thread's database connection back to the pool before a remote call.

    With a connection pool (DB_POOL_MAX_SIZE, the threads mode of a worker) the intent is
    committed by now and nothing is held open: the call may wait a second or a minute on
    the remote system, and the threads beside it need the connection meanwhile. The outcome
    checkpoint takes one from the pool again. Without a pool the process keeps its one
    persistent connection: closing it would cost a new session per step.
    """
    if connection.settings_dict.get("OPTIONS", {}).get("pool") \
            and not connection.in_atomic_block:
        connection.close()


def renew(lease: transitions.Lease) -> None:
    """`lease`'s call is alive (it began, or it called ctx.heartbeat()): its lease is extended
    for RUNS_CALL_LIMIT_SECONDS more at most."""
    if settings.RUNS_HEARTBEAT_SECONDS > 0:
        with _lock:
            _held[lease.run.pk] = (lease.token,
                                   time.monotonic() + settings.RUNS_CALL_LIMIT_SECONDS)


def renew_if_held(lease: transitions.Lease) -> None:
    """ctx.heartbeat() during a call: its limit starts again (outside a call, e.g. an
    agent step between its calls, nothing is registered)."""
    with _lock:
        held_now = _held.get(lease.run.pk, (None,))[0] == lease.token
    if held_now:
        renew(lease)


def beat() -> int:
    """Extend every registered lease whose call is within its limit now; returns how many
    were extended."""
    now = time.monotonic()
    with _lock:
        overdue = sorted(run_id for run_id, (_, ends) in _held.items() if ends <= now)
        for run_id in overdue:
            del _held[run_id]
        tokens = {run_id: token for run_id, (token, _) in _held.items()}
    for run_id in overdue:
        logger.warning("run %s: its call is still running after RUNS_CALL_LIMIT_SECONDS "
                       "(%g s); its lease is no longer extended: the sweeper takes the run "
                       "back and its call is settled by key", run_id,
                       settings.RUNS_CALL_LIMIT_SECONDS)
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


# What the heartbeat is called where a database that refuses writes is said (read_only).
LEASE_HEARTBEAT = "lease heartbeat"


def _loop(interval: float) -> None:
    stop = threading.Event()
    while not stop.wait(interval):
        # The next beat tries again; a lease that runs out meanwhile is taken back and
        # settled by key like any other.
        try:
            beat()
        except DatabaseError as exc:
            if store.refuses_writes(exc):
                # Read-only (a standby, default_transaction_read_only): said once, not as a
                # traceback at every beat; beat() closed the session that was refused.
                read_only.refused(logger, LEASE_HEARTBEAT, exc)
            else:
                logger.warning("lease heartbeat failed", exc_info=True)
        except Exception:
            logger.warning("lease heartbeat failed", exc_info=True)
        else:
            read_only.went_through(logger, LEASE_HEARTBEAT)
