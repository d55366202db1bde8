"""A caller that locked a run in its own transaction (an operator action locks it with its
permission check) hands that row to the transition it calls: the run is not read again, and
only the first transition takes it (a second one locks and reads the row afresh)."""

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import Run, RunStatus, StepStatus
from tests.factories import SYSTEM, new_run, place

pytestmark = pytest.mark.django_db


def _run_locks(queries) -> int:
    return sum(1 for q in queries.captured_queries
               if q["sql"].startswith('SELECT "runs_run"') and q["sql"].endswith("FOR UPDATE"))


def test_the_first_transition_takes_the_row_the_caller_locked():
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        with CaptureQueriesContext(connection) as queries, \
                transitions.within_caller_transaction(locked=locked):
            resumed = transitions.resume(run.pk, actor=SYSTEM, reason="from the caller's lock")
    assert _run_locks(queries) == 0
    assert resumed is locked and Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert AuditRecord.objects.get(run=run, action="resumed").reason == \
        "from the caller's lock"


def test_a_second_transition_locks_and_reads_the_run_again():
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.FAILED})
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)
        with CaptureQueriesContext(connection) as queries, \
                transitions.within_caller_transaction(locked=locked):
            transitions.resume(run.pk, actor=SYSTEM, reason="first")
            transitions.terminate(run.pk, actor=SYSTEM, reason="second")
    assert _run_locks(queries) == 1
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert list(AuditRecord.objects.filter(run=run).order_by("seq")
                .values_list("reason", flat=True))[-2:] == ["first", "second"]


def test_a_row_of_another_run_is_not_taken():
    run, other = new_run(), new_run()
    place(run, status=RunStatus.ATTENTION, step_statuses={"create-task": StepStatus.FAILED})
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=other.pk)
        with CaptureQueriesContext(connection) as queries, \
                transitions.within_caller_transaction(locked=locked):
            transitions.resume(run.pk, actor=SYSTEM, reason="another run")
    assert _run_locks(queries) == 1
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert Run.objects.get(pk=other.pk).status == other.status
