"""A migration of this release adds a column to a table the previous release keeps using
while it runs (runs_externalevent, approvals_bulkjob). The ALTER TABLE holds the table's
ACCESS EXCLUSIVE lock for an instant, but it waits for that lock behind any transaction
that touched the table, and every statement of the runtime on the table then waits behind
the ALTER: a session left idle in its transaction stalled event intake, or bulk jobs, for as
long as it was left. The migration waits a bounded time (audit.migration_operations.
LockWaitAtMost); past it `migrate` ends in one line saying the database would not wait,
nothing of the migration applied, and run again once the table is free it applies."""

import pytest
from django.core.management import call_command
from django.db import connection

from tests.cancelled_statement import other_session
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

MIGRATIONS = [
    ("runs", "0054_agentturn_refused", "0055_external_event_payload_mac",
     "runs_externalevent", "payload_mac"),
    ("approvals", "0006_admin_filter_indexes", "0007_bulk_job_phase",
     "approvals_bulkjob", "phase"),
]


def has_column(table: str, column: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM information_schema.columns WHERE table_name = %s "
                       "AND column_name = %s", [table, column])
        return cursor.fetchone() is not None


def applied(app: str, name: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM django_migrations WHERE app = %s AND name = %s",
                       [app, name])
        return cursor.fetchone() is not None


@pytest.fixture
def back_to_latest():
    yield
    call_command("migrate", verbosity=0)


@pytest.mark.parametrize(("app", "before", "migration", "table", "column"), MIGRATIONS)
def test_the_migration_gives_up_and_applies_once_the_table_is_free(
        back_to_latest, app, before, migration, table, column):
    call_command("migrate", app, before, verbosity=0)
    assert not has_column(table, column)

    holder = other_session(autocommit=False)
    try:
        # A session idle in a transaction that read the table: a report, a psql prompt.
        holder.execute(f"SELECT count(*) FROM {table}").fetchone()
        migrating = manage("migrate", app, migration, "--no-input")
        # Without a bound it waits for as long as the holder stays (the communicate's own
        # limit, far above the bound, only keeps a hanging test from hanging the suite).
        out, err = migrating.communicate(timeout=60)
        assert migrating.returncode == 1, (out, err)
        assert "manage.py migrate: the database would not wait (canceling statement due to " \
               "lock timeout)" in err, err
        assert "Traceback" not in err
        assert not has_column(table, column)
        assert not applied(app, migration)
        # The holder was never cancelled: only the migration gave up.
        assert holder.execute(f"SELECT count(*) FROM {table}").fetchone() is not None
    finally:
        holder.rollback()
        holder.close()

    again = manage("migrate", app, migration, "--no-input")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert has_column(table, column) and applied(app, migration)
