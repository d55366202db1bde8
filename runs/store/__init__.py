"""The database behind the runtime, as one object: PostgreSQL in production, SQLite (WAL,
immediate transactions) for the one-command demo. Every difference between the two lives
here, behind the same methods on both; the kernel and its helpers ask `current()` and never
which database they are on (tests/runs/test_one_dialect.py keeps it so).

Where PostgreSQL has a cheaper way, it takes it: a transition's writes in one statement
(runs.store.postgres), the clock of the database server, advisory locks, repeatable-read
snapshots. SQLite reaches the same outcomes through the ORM: its transactions are immediate
(console.settings), so the first statement of a transaction already holds the database's
one write lock, the lock PostgreSQL takes per row with SELECT ... FOR UPDATE.

The store tests (tests/runs/test_store.py) run on both databases in `make test`.
"""

from functools import cache

from django.db import InterfaceError, OperationalError, connection
from django.db.models import DateTimeField, Value
from django.db.models.functions import Now

from ..sqlstates import CLASHED
from .base import Store, join_next_transaction, withdraw_joined
from .postgres import PostgresStore
from .read_only import READ_ONLY, refuses_writes
from .sqlite import SqliteStore

__all__ = ["PostgresStore", "READ_ONLY", "SqliteStore", "SESSION_ENDED", "Store", "clashed",
           "current",
           "join_next_transaction", "of", "refuses_writes", "session_ended",
           "time_in_statement", "time_of_lock", "withdraw_joined"]

_STORES = {"postgresql": PostgresStore(), "sqlite": SqliteStore()}


@cache
def current() -> Store:
    """The store of the default database: one per process (its database is settled before
    the first call), asked at every checkpoint."""
    return of(connection)


def of(using) -> Store:
    """The store of the connection `using` (the one place that asks which database it is)."""
    return _STORES[using.vendor]


# SQLSTATE classes of a session ended rather than a statement refused: a connection exception
# (08) and an operator's or the server's intervention (57P: pg_terminate_backend, a shutdown,
# the database dropped, an idle session's timeout). runs.execution.database_outage's
# `unreachable` is this rule.
SESSION_ENDED = ("08", "57P")


def session_ended(exc: BaseException, *, using=connection) -> bool:
    """Whether `exc`, raised on the connection `using`, says that the session under it
    ended (the server ended it: pg_terminate_backend, a restart; or the network went), not
    that a statement was refused on a session that still works (a lock timeout, a deadlock:
    OperationalError too). Read from the error itself: Django may already have opened a new
    session in its place (a transaction whose rollback failed reconnects as it ends), one
    that holds none of the old one's session locks."""
    if not isinstance(exc, InterfaceError | OperationalError):
        return False
    state = getattr(exc.__cause__, "sqlstate", None)
    if state is not None:
        return state.startswith(SESSION_ENDED)
    session = using.connection
    return session is None or of(using).session_lost(exc, session)


def clashed(exc: BaseException) -> bool:
    """Whether `exc` says the database rolled the transaction back for its clash with another
    session, or would not wait for one (runs.sqlstates.CLASHED): nothing of it was written,
    and the session still works."""
    return isinstance(exc, OperationalError) and \
        getattr(exc.__cause__, "sqlstate", None) in CLASHED


def time_of_lock(run, *, given=None):
    """The time a transition judges a due time and a lease by, under the lock it took on
    `run`: a time its caller gave (a test's), else the database's clock read as the run was
    locked (Store.lock_run's `locked_at`; another row locked with that time read beside it,
    as `locked_at`, is dated the same way), else, for a row locked otherwise, this process's
    estimate of it. The estimate runs ahead or behind for a while after this host's clock
    stepped: judged by it, a lease, an event's deadline or a request's due time moves."""
    return given or getattr(run, "locked_at", None) or current().now()


def time_in_statement(given=None):
    """The time a statement judges a due time or a lease by, and dates what it writes by,
    as an expression: the database's clock in the statement itself, or a time its caller
    gave (a test's). Not this process's estimate of that clock, which runs ahead or behind
    for a while after this host's clock stepped. Under a lock already taken, time_of_lock."""
    return Now() if given is None else Value(given, output_field=DateTimeField())
