"""The web server's bound on waiting for a row another session holds (DB_LOCK_TIMEOUT).

A person's request (a console page, an API call, an approver's decision) that meets a run
row held by a session left idle in a transaction ends after the bound with nothing written,
answered 503 with Retry-After (console.errors, api.routes), instead of waiting until the
web server kills its worker. Workers and beat's passes keep waiting.

The bound is set by one statement on each new connection of the web server, not in libpq's
`options` startup parameter: PgBouncer, which the deployment guide allows in session mode,
refuses a startup parameter it does not track, and every connection of the web server
would fail. A lock_timeout that DATABASE_URL's `options` names wins.
"""

from django.db.backends.signals import connection_created

from runs import store


def bound_lock_waits(seconds: float) -> None:
    """Have every connection the web server opens from now on wait at most `seconds` for a
    row another session holds (0: without end)."""
    if seconds > 0:
        connection_created.connect(_bound_on_connect(seconds), weak=False,
                                   dispatch_uid="console.lock_waits")


def _bound_on_connect(seconds: float):
    def bound(sender, connection, **kwargs):
        given = connection.settings_dict.get("OPTIONS", {}).get("options", "")
        statements = store.current().lock_wait_statements
        # None where the database has no such bound (SQLite's writers wait on its busy
        # timeout already).
        if statements is None or "lock_timeout" in given:
            return
        with connection.cursor() as cursor:
            cursor.execute(statements[0], [str(round(seconds * 1000))])
    return bound
