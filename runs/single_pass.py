"""One pass of a periodic job at a time, across every worker and machine.

Beat sends a sweep every few seconds whatever became of the last one, so a pass that takes
longer than its interval (a mass worker death leaves hundreds of leases to take back) would
overlap the next, both working the same rows. A pass therefore first takes its job's lock,
without waiting: if another pass holds it, this one does nothing (that pass is already at
the work, and the next interval comes soon).

On PostgreSQL the lock is a session-level advisory lock (pg_try_advisory_lock), released
when the pass ends, or by the server when the worker's session dies. Such a lock needs a
session of its own: behind a transaction-pooling PgBouncer, point workers at PostgreSQL
itself. On other databases (SQLite: the demo, on one machine) it is a file lock under
VAR_DIR/locks.
"""

import contextlib
import fcntl
import hashlib
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError, connection


def lock_key(job: str) -> int:
    """The job's advisory lock key: 64 bits of a hash of its name, the same in every
    process (Python's hash() is not)."""
    digest = hashlib.sha256(f"durable-workflows:{job}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextlib.contextmanager
def single_pass(job: str) -> Iterator[bool]:
    """Hold `job`'s lock for the block if nobody else does; yields whether it is held."""
    if connection.vendor == "postgresql":
        with _advisory_lock(lock_key(job)) as held:
            yield held
    else:
        with _file_lock(Path(settings.VAR_DIR) / "locks" / f"{job}.lock") as held:
            yield held


@contextlib.contextmanager
def _advisory_lock(key: int) -> Iterator[bool]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        (held,) = cursor.fetchone()
    try:
        yield held
    finally:
        if held:
            # A session that died during the pass took its lock with it.
            with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[bool]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
