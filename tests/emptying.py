"""How the test database is emptied after each transactional test, on PostgreSQL.

Django's `flush` (TransactionTestCase's teardown) truncates every table as one statement and
then sends post_migrate, which makes the content types, the permissions and the workflows'
rows again: about half a second a test here, a TRUNCATE making new files for some 300
tables and indexes, most of which the test never wrote. Here only the tables that have any
page on disk are truncated, with the tables referencing them (CASCADE: a foreign key
refuses a truncate of the table it points to alone). What the next test finds is what flush
leaves, down to the tables' sizes, on which the planner's choices depend (a test of a query
plan sees the plan of a fresh table, not of one holding an earlier test's dead rows): every
table empty but the content types and the permissions (flush would make the same ones
again, under new ids nobody keeps) and the workflows' rows post_migrate makes, kept for the
registered workflows.

Only a superuser may truncate the audit tables (their guard, audit/migrations/0006), as the
tests' role is; on SQLite (the store tests, `make test`) Django's flush serves."""

from django.db import connection, transaction
from django.test import TransactionTestCase

# Rows flush would make again, the same ones: kept.
KEPT = frozenset({"django_content_type", "auth_permission"})
WORKFLOWS = "runs_workflow"


def empty_test_database() -> None:
    from runs.definitions.workflow_rows import ensure_workflow_rows, registry
    from runs.models import Workflow

    quote = connection.ops.quote_name
    tables = sorted(set(connection.introspection.django_table_names(
        only_existing=True, include_views=False)) - KEPT - {WORKFLOWS})
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT relname FROM pg_class WHERE relkind = 'r' AND "
                           "relnamespace = current_schema()::regnamespace AND "
                           "relname = ANY(%s) AND pg_relation_size(oid) > 0", [tables])
            written = [name for (name,) in cursor.fetchall()]
            if written:
                cursor.execute(f"TRUNCATE {', '.join(quote(t) for t in written)} CASCADE")
        # post_migrate's receiver of the runs app (runs.apps) makes these rows after flush.
        Workflow.objects.exclude(name__in=registry.names()).delete()
        ensure_workflow_rows(Workflow)


def empty_by_truncating_what_was_written() -> None:
    """Makes every transactional test's teardown empty the database with empty_test_database
    where flush would serve the same end (one database, no serialized rollback, every app)."""
    flush = TransactionTestCase._fixture_teardown

    def teardown(test_case):
        if connection.vendor != "postgresql" or test_case.available_apps is not None \
                or test_case.serialized_rollback \
                or set(test_case._databases_names(include_mirrors=False)) != {"default"}:
            return flush(test_case)
        return empty_test_database()

    TransactionTestCase._fixture_teardown = teardown
