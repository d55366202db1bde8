"""The hot statements (start_run's insert, the claim and every step's checkpoint) are
prepared on the server and keep one generic plan, instead of being parsed and planned at
each execution; a replaced connection prepares them again."""

import pytest
from django.db import connection

from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _prepared() -> list[tuple[str, int, int]]:
    """(start of the statement, generic plans used, custom plans made) per statement
    prepared on this connection through the protocol."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans, custom_plans "
                       "FROM pg_prepared_statements WHERE NOT from_sql")
        return cursor.fetchall()


def _checkpoint_plans() -> tuple[int, int]:
    generic = custom = 0
    for statement, g, c in _prepared():
        if statement.startswith("WITH c AS (SELECT coalesce("):
            generic, custom = generic + g, custom + c
    return generic, custom


def test_checkpoints_are_prepared_with_one_generic_plan():
    # Without prepare_threshold in the database OPTIONS, psycopg ignores prepare=True and
    # every checkpoint is parsed and planned again: this is what would catch it.
    assert connection.settings_dict["OPTIONS"].get("prepare_threshold") is not None
    run = new_run()
    assert any(statement.startswith("WITH w AS (INSERT INTO runs_workflow")
               for statement, _, _ in _prepared())
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    generic, custom = _checkpoint_plans()
    assert generic >= 4 and custom == 0


@pytest.mark.django_db(transaction=True)
def test_a_new_connection_prepares_its_statements_again():
    executor.advance_run(new_run().pk, worker="w1")
    assert _checkpoint_plans()[0] > 0
    # What the worker does when the session died (runs.tasks): a new connection, on which
    # the statements psycopg had prepared on the old one do not exist.
    connection.close()
    connection.ensure_connection()
    assert _checkpoint_plans() == (0, 0)
    assert executor.advance_run(new_run().pk, worker="w1") == RunStatus.COMPLETED
    assert _checkpoint_plans()[0] > 0
