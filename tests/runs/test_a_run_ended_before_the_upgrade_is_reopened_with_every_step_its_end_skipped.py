"""A run a person ended while a step waited out its retry is reopened with that step pending
again, even when the run ended under an earlier release, which left the failed attempt's
finished_at on the step it skipped. Only an event wait is ever skipped by a person (skip_event),
so only a skipped event wait stays skipped."""

import pytest
from django.utils import timezone

from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransientError
from runs.models import RunStatus, Step, StepStatus
from tests.factories import SYSTEM, new_run, step

pytestmark = pytest.mark.django_db


def test_a_step_skipped_by_an_end_before_the_upgrade_runs_after_a_reopen(script):
    script.plan["create-task"] = [TransientError("503")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert step(run, "create-task").status == StepStatus.SCHEDULED
    transitions.terminate(run.pk, actor=SYSTEM, reason="customer called")
    skipped = step(run, "create-task")
    assert skipped.status == StepStatus.SKIPPED and skipped.finished_at is None
    # As a release before this one left it: the failed attempt dated the step it skipped.
    Step.objects.filter(pk=skipped.pk).update(finished_at=timezone.now())

    transitions.reopen(run.pk, actor=SYSTEM, reason="ended by mistake")
    assert step(run, "create-task").status == StepStatus.PENDING
    transitions.resume(run.pk, actor=SYSTEM, reason="continue")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    # The task was made once, on the attempt after the reopen, under the step's one key.
    tasks = [(key, attempt) for name, key, attempt in script.calls if name == "create-task"]
    assert [attempt for _, attempt in tasks] == [1, 2]
    assert {key for key, _ in tasks} == {step(run, "create-task").idempotency_key}
    assert step(run, "create-task").status == StepStatus.SUCCEEDED
    assert len(script.effects) == 2  # one task, one ledger entry
