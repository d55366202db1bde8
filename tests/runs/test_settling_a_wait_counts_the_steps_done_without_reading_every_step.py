"""A wait settled (an event wait that timed out and goes on with its default, an approval
decided) counts the run's steps done without reading every step row of the run again: in a
run of thousands of steps (a loop of waits) each settling read all of them, and the run was
quadratic in the rows it read. The worker counts from the rows its lease holds; a decision,
which holds none, has the database count them."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.execution import executor
from runs.machine import transitions
from runs.models import RunStatus, StepStatus
from tests.factories import SYSTEM, make_due, new_run, step

pytestmark = pytest.mark.django_db

# Every step row of one run, as steps_of reads them (each column of each row).
EVERY_STEP = re.compile(r'^SELECT "runs_step"\."id", .* FROM "runs_step" '
                        r'WHERE "runs_step"\."run_id" = \d+ ORDER BY "runs_step"\."position"')


def _every_step_reads(queries) -> list[str]:
    return [q["sql"] for q in queries if EVERY_STEP.match(q["sql"])]


def test_a_timed_out_event_wait_reads_no_step_row_again(script):
    run = new_run("test-payment-continue")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    make_due(run)
    with CaptureQueriesContext(connection) as queries:
        assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    assert _every_step_reads(queries.captured_queries) == []
    run.refresh_from_db()
    assert run.steps_done == 3
    assert step(run, "payment").status == StepStatus.SUCCEEDED


def test_an_approval_decided_has_the_database_count_the_steps_done(script):
    run = new_run("test-approval")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    done_before = run.steps_done
    with CaptureQueriesContext(connection) as queries:
        transitions.decide_approval(run.pk, step_name="approve", approved=True, actor=SYSTEM)
    assert _every_step_reads(queries.captured_queries) == []
    run.refresh_from_db()
    assert run.steps_done == done_before + 1
    assert step(run, "approve").status == StepStatus.SUCCEEDED
