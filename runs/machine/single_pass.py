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
VAR_DIR/locks (runs.store).
"""

import contextlib
import hashlib
from collections.abc import Iterator

from .. import store


def lock_key(job: str) -> int:
    """The job's advisory lock key: 64 bits of a hash of its name, the same in every
    process (Python's hash() is not)."""
    digest = hashlib.sha256(f"durable-workflows:{job}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


@contextlib.contextmanager
def single_pass(job: str) -> Iterator[bool]:
    """Hold `job`'s lock for the block if nobody else does; yields whether it is held."""
    with store.current().pass_lock(job, lock_key(job)) as held:
        yield held
