"""What a worker's tasks do while PostgreSQL cannot be reached (a restart, a failover, the
network to it): one rule for every task beat sends, and the test the run tasks use to tell
a lost connection from any other database error.

Beat sends each pass (the sweeper, the schedules, the approvals sweep, the webhook publisher,
the archive job) every few seconds whatever the database's state. A pass that cannot reach
it has nothing to do but wait for the next: it says so once, in one line, while the outage
lasts, and once more when the database answers again. Left to Celery, every pass of every
tick logged an eighty-line traceback: four a second, which buries the line that matters.
"""

import functools
import logging

from django.db import DatabaseError, InterfaceError, OperationalError, connection

from ..error_text import first_line
from ..sqlstates import ROLLED_BACK, WOULD_NOT_WAIT
from .outages import outages

logger = logging.getLogger(__name__)

# Errors a lost or refused connection raises. A deadlock or a statement timeout raises
# OperationalError too, on a connection that still works: `unreachable` tells them apart.
CONNECTION_LOST = (InterfaceError, OperationalError)
UNREACHABLE = {"skipped": "the database cannot be reached"}
REFUSING_WRITES = {"skipped": "the database refuses writes"}


def unreachable(exc: BaseException, *, using=connection) -> bool:
    """Whether `exc` says the database cannot be reached, rather than that a statement failed
    on a connection that still works (those are the task's own errors, reported as such).
    `using`: the connection it was raised on. The store's rule (runs.store.session_ended),
    which asks the error's SQLSTATE first: the session may be gone by now for another reason
    (Django's manage.py closes every connection before the error reaches its caller)."""
    # Imported here: manage.py imports this module before Django's apps are loaded, and the
    # store's module defines models.
    from .. import store

    return store.session_ended(exc, using=using)


def would_not_wait(exc: BaseException) -> bool:
    """Whether `exc` says the database answered but would not wait (WOULD_NOT_WAIT)."""
    return getattr(exc.__cause__, "sqlstate", None) in WOULD_NOT_WAIT


def refuses_writes(exc: BaseException) -> bool:
    """Whether `exc` says the database refuses writes (read-only, a standby): the store's
    rule (runs.store.refuses_writes). Said as such, once, never as a statement of the task's
    own that failed: Django raises it as InternalError, which Celery logged as a traceback
    at every tick."""
    from .. import store  # as in unreachable

    return store.refuses_writes(exc)


READ_ONLY_WORDS = ("the database refuses writes ({}): it is read-only (a standby, or "
                   "default_transaction_read_only is on) until a person allows them again")


def refuses_writes_text(exc: BaseException) -> str:
    """The words that say `exc` (refuses_writes) to a person, with the database's own."""
    return READ_ONLY_WORDS.format(first_line(exc))


# A database at its connection limit (max_connections, or a role's or a database's CONNECTION
# LIMIT) refuses a new session at once (FATAL, SQLSTATE 53300), which libpq reports without its
# SQLSTATE: told by the server's words. It answers, and nothing is wrong with DATABASE_URL:
# telling it as a database that cannot be reached sends the person to the wrong place.
CONNECTIONS_FULL = "53300"
CONNECTIONS_FULL_WORDS = ("too many clients already", "remaining connection slots are reserved",
                          "too many connections for")


def connections_full(exc: BaseException) -> bool:
    """Whether `exc` says the database refused a new session because every connection it
    allows is in use."""
    if not isinstance(exc, CONNECTION_LOST):
        return False
    if getattr(exc.__cause__, "sqlstate", None) == CONNECTIONS_FULL:
        return True
    text = str(exc)
    return any(words in text for words in CONNECTIONS_FULL_WORDS)


def connections_full_detail(exc: BaseException) -> str:
    """What a person is told when `exc` (connections_full) stopped what they asked for."""
    return (f"the database refuses new connections ({first_line(exc)}): every connection it "
            "allows is in use (max_connections, or a limit on the role or the database), so "
            "nothing was done; try again in a little while, and if it lasts, its "
            "administrator can see what holds them in pg_stat_activity")


def refused_change_detail(exc: BaseException) -> str:
    """What a person who asked for a change (a console page, an API call, a command) is told
    when the database refused it (refuses_writes): what happened, that nothing was written,
    that reading still works, and when to try again."""
    return (f"the database refuses changes just now ({first_line(exc)}): it is read-only "
            "(a standby after a failover, or set so by an administrator), so nothing was "
            "done; reading still works: try again once it accepts changes")


def connection_trouble_text(exc: BaseException) -> str:
    """What a task's log says of `exc` (one of CONNECTION_LOST): a lost connection only when
    it is one, not a statement the database would not wait for or rolled back, which sends
    whoever reads it to the network instead of to the session that held the row."""
    state = getattr(exc.__cause__, "sqlstate", None)
    if state in WOULD_NOT_WAIT:
        return (f"the database would not wait ({first_line(exc)}): a row it needed was held "
                "by another session, or the statement was cancelled")
    if state in ROLLED_BACK:
        return (f"the database rolled the transaction back ({first_line(exc)}): it clashed "
                "with another session's")
    return f"database connection lost ({exc})"


def raised_within(exc: BaseException, method: str, owner: type) -> bool:
    """Whether `exc` was raised inside the method named `method` of an instance of `owner`
    (read from its traceback): where an error of a lost connection came from decides what a
    person may be told of what was done."""
    frame = exc.__traceback__
    while frame is not None:
        if frame.tb_frame.f_code.co_name == method and isinstance(
                frame.tb_frame.f_locals.get("self"), owner):
            return True
        frame = frame.tb_next
    return False


def commit_under_way(exc: BaseException) -> bool:
    """Whether `exc` was raised as a transaction was being committed (Django's connection
    `_commit`), or while that error was being handled (commit_error): a connection lost then
    leaves it unknown whether the server committed, so a person must not be told that
    nothing was done."""
    return commit_error(exc) is not None


def commit_error(exc: BaseException) -> BaseException | None:
    """The error raised as a transaction was being committed (Django's connection
    `_commit`): `exc`, or the one it was raised while handling. A COMMIT whose connection
    is lost is followed by Django's reconnect to restore autocommit as its atomic block
    ends; with the database still out of reach, that reconnect's error is what reaches the
    caller, the COMMIT's in its __context__."""
    from django.db.backends.base.base import BaseDatabaseWrapper

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if raised_within(exc, "_commit", BaseDatabaseWrapper):
            return exc
        seen.add(id(exc))
        exc = exc.__context__
    return None


def beat_pass(name: str):
    """Run a periodic pass (a Celery task beat sends) under the outage rule: while the
    database cannot be reached the pass answers UNREACHABLE instead of failing, and its
    broken connection is dropped so the next pass connects anew; while it refuses writes
    (refuses_writes), REFUSING_WRITES. Each is said once when it begins and once when it
    ends."""
    read_only = f"{name} (read-only)"

    def decorate(run_pass):
        @functools.wraps(run_pass)
        def guarded(*args, **kwargs):
            try:
                result = run_pass(*args, **kwargs)
            except DatabaseError as exc:
                if refuses_writes(exc):
                    # A new session next time: after a failover it may reach the new primary,
                    # and one opened while the database was read-only stays so after a
                    # database's or role's setting is reset.
                    connection.close()
                    if outages.failed_once_more(read_only) == 1:
                        logger.warning("%s: %s; the pass is tried again at each of beat's "
                                       "ticks, and this is said again only when it accepts "
                                       "them", name, refuses_writes_text(exc))
                    return REFUSING_WRITES
                if not isinstance(exc, CONNECTION_LOST) or not unreachable(exc):
                    raise
                connection.close()
                if outages.failed_once_more(name) == 1:
                    logger.warning("%s: the database cannot be reached (%s); the pass is "
                                   "tried again at each of beat's ticks, and this is said "
                                   "again only when it answers", name, first_line(exc))
                return UNREACHABLE
            missed = outages.answered(name)
            if missed:
                logger.warning("%s: the database answers again, after %d pass(es) that "
                               "could not reach it", name, missed)
            refused = outages.answered(read_only)
            if refused:
                logger.warning("%s: a pass went through again, after %d pass(es) the "
                               "database's refusal of writes stopped", name, refused)
            return result

        return guarded

    return decorate
