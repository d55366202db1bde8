"""The console's session engine (SESSION_ENGINE): Django's database sessions, with a
database failure while the session is saved told as one.

Django's store turns any DatabaseError of the session's UPDATE into UpdateError, which
means "the row is gone" (the person signed out in another tab), and SessionMiddleware
answers that with a 400 "session interrupted". A statement cancelled there, a lock timeout,
a lost connection or a database that refuses writes (read-only) is not that: it is raised
as the database error it is, and answered 503 by console.errors.server_error, which says
the request may have been done (the session is saved after the view's work). Any other
error, an UpdateError for a row really gone included, is left to Django as it was."""

from django.contrib.sessions.backends import db
from django.contrib.sessions.backends.base import SessionBase, UpdateError

from api.errors import DATABASE_DOWN
from runs.execution.database_outage import raised_within, refuses_writes


class SessionStore(db.SessionStore):
    def save(self, must_create=False):
        try:
            super().save(must_create=must_create)
        except UpdateError as exc:
            failure = exc.__context__
            if isinstance(failure, DATABASE_DOWN) or refuses_writes(failure):
                # With its cause, the driver's error and its SQLSTATE: what says whether
                # the database would not wait or could not be reached.
                raise failure from failure.__cause__
            raise


def session_save_under_way(exc: BaseException) -> bool:
    """Whether `exc` was raised as a request's session was being saved (after the view's
    work, which may have been done)."""
    return raised_within(exc, "save", SessionBase)
