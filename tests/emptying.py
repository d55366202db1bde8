"""How the test database is emptied after each transactional test, on PostgreSQL.

Django's `flush` (TransactionTestCase's teardown) truncates every table as one statement and
then sends post_migrate, which makes the content types, the permissions and the workflows'
rows again: about half a second a test here, a TRUNCATE making new files for some 300
tables and indexes, for tables that hold a few rows. Deleting the rows costs a few
milliseconds. What the test finds afterwards is what flush leaves: every table empty but
the content types and the permissions (flush would make the same ones again, under new ids
nobody keeps), and the workflows' rows post_migrate makes.

The deletes run with the session's replication role set to replica, which switches off the
triggers for its statements: the foreign keys' (every table is emptied, in any order) and
the append-only guards of the audit and archive tables. Only a superuser may set it, as the
tests' role is; on SQLite (the store tests, `make test`) Django's flush serves."""

from django.db import connection, transaction
from django.test import TransactionTestCase

# Rows flush would make again, the same ones: kept.
KEPT = frozenset({"django_content_type", "auth_permission"})


def empty_test_database() -> None:
    from runs.definitions.workflow_rows import ensure_workflow_rows
    from runs.models import Workflow

    quote = connection.ops.quote_name
    tables = sorted(set(connection.introspection.django_table_names(
        only_existing=True, include_views=False)) - KEPT)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
            cursor.execute(";".join(f"DELETE FROM {quote(table)}" for table in tables))
        # post_migrate's receiver of the runs app (runs.apps): flush sends it.
        ensure_workflow_rows(Workflow)


def empty_by_delete() -> None:
    """Makes every transactional test's teardown empty the database with empty_test_database
    where flush would serve the same end."""
    flush = TransactionTestCase._fixture_teardown

    def teardown(test_case):
        if connection.vendor != "postgresql" or test_case.available_apps is not None \
                or test_case.serialized_rollback \
                or set(test_case._databases_names(include_mirrors=False)) != {"default"}:
            return flush(test_case)
        return empty_test_database()

    TransactionTestCase._fixture_teardown = teardown
