"""The PostgreSQL server's clock, read in a statement of its own: the clock every worker's
estimate (PostgresStore.now) is measured against, and what a wait's duration is counted
from (Store.server_now)."""

from django.db import connection


def server_now():
    """The server's clock as the statement runs (clock_timestamp(), not the start of the
    transaction it may be in)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]
