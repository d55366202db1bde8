"""PostgreSQL's transaction ids, for a reader that must know which writers may still commit
what it cannot see yet (api.webhooks: a hole in the ids is passed only once no transaction
that may fill it is open). Reached through the store (Store.open_transactions,
Store.transaction_id): a database with one writer at a time has none of this."""

from django.db import connection


def open_transactions() -> tuple[int, bool]:
    """(the oldest transaction id of another session still open, or the next to be given
    when none is; whether this session has no transaction id yet)."""
    with connection.cursor() as cursor:
        # The snapshot's list of open transactions (xip), not its xmin: the list leaves out
        # this session's own, which a caller's transaction (a test's) may hold, and which
        # cannot hide a row from this session. Not the snapshot's xmax alone either: it is
        # one past the newest transaction that has ended, and one still open can stand above.
        cursor.execute(
            "SELECT coalesce((SELECT min(x::text::bigint) FROM pg_snapshot_xip(s) AS x),"
            " pg_snapshot_xmax(s)::text::bigint), pg_current_xact_id_if_assigned() IS NULL"
            " FROM pg_current_snapshot() AS s")
        oldest, fresh = cursor.fetchone()
    return oldest, fresh


def transaction_id() -> int:
    """This transaction's id, given now if it had none."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_current_xact_id()::text::bigint")
        return cursor.fetchone()[0]
