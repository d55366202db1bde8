"""A step's checkpoint updates its run in place: PostgreSQL writes the new row version
beside the old one and no index entry (a HOT update) as long as no indexed column of
runs_run changes. Each step moves the audit chain's head, the step reached and the lease;
none of those may be indexed, or every index of the table gets an entry at every step."""

import pytest
from django.db import connection

from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _run_updates() -> tuple[int, int]:
    """Updates of runs_run in this transaction (the test's), and how many were HOT."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_xact_user_tables "
                       "WHERE relname = 'runs_run'")
        row = cursor.fetchone()
    return (row[0], row[1]) if row else (0, 0)


def test_each_steps_checkpoint_updates_the_run_in_place(script):
    run = new_run()
    updates_before, hot_before = _run_updates()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    updates_after, hot_after = _run_updates()
    updates, hot = updates_after - updates_before, hot_after - hot_before
    # Four steps: the claim (queued -> running) and the completion change the indexed
    # status, and may not be HOT; the three checkpoints between them, each recording a
    # step's outcome and the next one's intent, must be.
    assert updates >= 5
    assert updates - hot <= 2, (updates, hot)
