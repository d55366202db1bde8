"""What became of a person's change whose COMMIT lost its connection, asked of PostgreSQL.

A connection lost while a transaction is being committed leaves the client not knowing
whether the server committed: the COMMIT may have been lost on its way (nothing was done)
or its answer on the way back (it was done). Told "it may have been done", an operator has
to go and look. PostgreSQL can answer: the transaction's id, read in the transaction just
before the COMMIT (`pg_current_xact_id_if_assigned()`), can be asked about on a new
connection afterwards (`pg_xact_status`: committed, aborted, in progress, or NULL once too
old to tell).

Reading the id costs a round trip per commit, so it is read only at the doors where a
person waits for the answer: a console page or an API call that changes something
(console.answered_commits), and a command once it acts as a proven person (console.cli).
A worker never enters a door: a step's checkpoint gains no round trip (the worker settles an
effect by its key already).

Each door asks `commit_outcome(exc)` of the error it got, and says "it was done" where the
database says COMMITTED, "nothing was done" where it says NOT_COMMITTED, and "it may have
been done" only where it cannot be told (UNKNOWN: no id was read, the database still cannot
be reached, the transaction is too old to be known, or the server answering is not the one
that gave the id or has restarted since). The id is a number, not a secret; no statement is
logged here.
"""

import logging
import types
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from .database_outage import commit_error

logger = logging.getLogger(__name__)

COMMITTED = "committed"
NOT_COMMITTED = "not committed"
UNKNOWN = "unknown"

# The door the current request or command came through, if any: [whether its commits are
# answered, the database's alias]. None outside any door (a worker, a test's own code).
_door: ContextVar[list | None] = ContextVar("commit_door", default=None)

# Where the id read before a COMMIT is kept: on the error the COMMIT raised.
ATTRIBUTE = "lost_commit"


@dataclass(frozen=True)
class LostCommit:
    """The transaction whose COMMIT failed: `sent` False if the connection was lost before
    the COMMIT could be sent (it was never committed); `xid` None if it wrote nothing."""

    sent: bool
    xid: str | None = None
    backend_pid: int | None = None
    # When the server that gave the id started: an id means this transaction only on that
    # server, in that run of it (see _asked).
    server_started: object = None
    # Its after-commit hooks (Django's on_commit: wake-up hints, a bulk job's hand-over),
    # which Django drops with the error: run once if the database says it committed.
    hooks: list = field(default_factory=list)


@contextmanager
def door(*, answering: bool = True, using: str = DEFAULT_DB_ALIAS):
    """A request or a command a person waits on. `answering`: whether its commits are
    answerable from the start (a page or an API call that changes something); a command
    turns it on once it acts as a proven person (acting_for_a_person)."""
    token = _door.set([answering, using])
    if answering:
        _watch(using)
    try:
        yield
    finally:
        _door.reset(token)


def acting_for_a_person() -> None:
    """From here on, the commits of the current door (a command's) are made on a proven
    person's behalf: each reads its transaction's id first, so that a COMMIT whose
    connection is lost can be answered. Outside a door, nothing."""
    state = _door.get()
    if state is not None:
        state[0] = True
        _watch(state[1])


def _watch(using: str) -> None:
    # Imported here: manage.py's entry imports this module before Django's apps are loaded,
    # and the store's import reaches the models.
    from .. import store

    wrapper = connections[using]
    if store.of(wrapper).tells_lost_commits and "_commit" not in vars(wrapper):
        # On this thread's connection object, for its life: inert outside a door.
        wrapper._commit = types.MethodType(_commit, wrapper)


def _answering() -> bool:
    state = _door.get()
    return state is not None and state[0]


def _commit(self):
    """The connection's COMMIT, within a door that answers its commits: the transaction's
    id is read first and kept on the error a lost COMMIT raises (ATTRIBUTE). Named as
    Django's, whose frame runs.execution.database_outage.commit_under_way looks for."""
    commit = type(self)._commit
    if not _answering() or self.connection is None:
        return commit(self)
    try:
        with self.wrap_database_errors:
            xid, pid, started = self.connection.execute(
                "SELECT pg_current_xact_id_if_assigned()::text, pg_backend_pid(), "
                "pg_postmaster_start_time()", prepare=False).fetchone()
    except DatabaseError as exc:
        # The COMMIT was never sent: the server ends (aborts) a transaction whose session
        # went without one, and rolls back one whose statement failed.
        setattr(exc, ATTRIBUTE, LostCommit(sent=False))
        raise
    hooks = list(self.run_on_commit)
    try:
        return commit(self)
    except DatabaseError as exc:
        setattr(exc, ATTRIBUTE, LostCommit(sent=True, xid=xid, backend_pid=pid,
                                           server_started=started, hooks=hooks))
        raise


def commit_outcome(exc: BaseException, *, using: str = DEFAULT_DB_ALIAS) -> str:
    """What became of the transaction whose COMMIT raised `exc` (one raised as a commit was
    under way: runs.execution.database_outage.commit_under_way): COMMITTED, NOT_COMMITTED,
    or UNKNOWN where it cannot be told. Asked once per error, on a new connection."""
    exc = commit_error(exc) or exc
    known = getattr(exc, "commit_outcome", None)
    if known is not None:
        return known
    lost = getattr(exc, ATTRIBUTE, None)
    if lost is None:
        outcome = UNKNOWN  # no id was read: not a door's commit
    elif not lost.sent or lost.xid is None:
        outcome = NOT_COMMITTED  # never sent, or it wrote nothing
    else:
        outcome = _asked(lost, using)
    try:
        exc.commit_outcome = outcome
    except AttributeError:  # an error that takes no attribute: asked again if asked
        pass
    if outcome == COMMITTED:
        _run_hooks_once(lost)
    return outcome


def _run_hooks_once(lost: LostCommit) -> None:
    """The after-commit hooks of a transaction the database says it committed, which
    Django dropped with the COMMIT's error: run now, and once (taken off the record). A
    wake-up hint then goes out at once rather than at the sweeper's next pass, and a bulk
    job is handed over at all."""
    hooks, lost.hooks[:] = list(lost.hooks), []
    for _, hook, _ in hooks:
        try:
            hook()
        except Exception:
            logger.warning("an after-commit hook of a change whose COMMIT answer was lost "
                           "failed", exc_info=True)


def _asked(lost: LostCommit, using: str) -> str:
    asker = connections.create_connection(using)
    try:
        with asker.wrap_database_errors:
            asker.ensure_connection()
            session = asker.connection
            status, started = _status(session, lost.xid)
            if started != lost.server_started:
                # Another server (a failover) or the same one restarted: a transaction whose
                # commit record never reached its disk is gone with its id, which the server
                # may since have given to another transaction; its status is not this one's.
                return UNKNOWN
            if status == "in progress":
                # The server has not yet seen the old session go (its end of a cut link
                # learns of it later), so its transaction is still open: it can no longer
                # commit unless its COMMIT is already there. End that session, named by its
                # pid AND the transaction it holds (never another's that took the pid), and
                # wait for it to be gone: its transaction's status is final then.
                session.execute(
                    "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                    "WHERE pid = %s AND backend_xid = xid(%s::xid8)",
                    [lost.backend_pid, lost.xid], prepare=False)
                status, _ = _status(session, lost.xid)
    except DatabaseError:
        return UNKNOWN  # still out of reach, or refused: it cannot be told
    finally:
        asker.close()
    return {"committed": COMMITTED, "aborted": NOT_COMMITTED}.get(status, UNKNOWN)


def _status(session, xid: str) -> tuple:
    """The transaction's status and when the server answering started."""
    return session.execute("SELECT pg_xact_status(%s::xid8), pg_postmaster_start_time()",
                           [xid], prepare=False).fetchone()
