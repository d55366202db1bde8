"""A database that answers and reads but refuses every write (SQLSTATE 25006,
read_only_sql_transaction): default_transaction_read_only turned on by a DBA or a maintenance
script, a hot standby reached after a failover or a demotion. Nothing the runtime does changes
it, and it lasts until a person allows writes again; Django raises it as InternalError, which
every periodic write (a beat pass, a worker's heartbeat) logged as a traceback each time.

Here: the test of it, and the words of a periodic write that meets it, said once when the
refusal begins and once when a write goes through again, per process.
(runs.execution.database_outage says it for the beat passes and the run tasks.)"""

import logging
import threading

from django.db import DatabaseError

from ..error_text import first_line

READ_ONLY = "25006"

_refused: set[str] = set()
_lock = threading.Lock()


def refuses_writes(exc: BaseException) -> bool:
    """Whether `exc` says the database refuses writes (READ_ONLY), not that a statement of
    the caller's own failed."""
    return isinstance(exc, DatabaseError) and \
        getattr(exc.__cause__, "sqlstate", None) == READ_ONLY


def refused(logger: logging.Logger, what: str, exc: BaseException) -> None:
    """`what` (a periodic write) met a database that refuses writes: said once."""
    with _lock:
        first = what not in _refused
        _refused.add(what)
    if first:
        logger.warning("%s: the database refuses writes (%s); tried again as before, and "
                       "said again only when one goes through", what, first_line(exc))


def went_through(logger: logging.Logger, what: str) -> None:
    """`what` was written: if it had been refused, say that writes go through again."""
    if what not in _refused:  # the common case, without the lock
        return
    with _lock:
        if what not in _refused:
            return
        _refused.discard(what)
    logger.warning("%s: the database accepts writes again", what)
