"""A run whose approval was rejected, with nothing done that an undo could take back, is led
by Terminate, as its runbook section says ("or Terminate if there is nothing to undo"),
never by a Compensate the run refuses; a run with something to undo is led by Compensate."""

import pytest

from audit.chain import Actor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.guidance import recommend
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def _rejected(workflow: str, **step_statuses) -> Run:
    run = new_run(workflow)
    return place(run, status=RunStatus.ATTENTION,
                 attention_reason=AttentionReason.APPROVAL_REJECTED,
                 status_message="approve rejected by ann", step_statuses=step_statuses)


def test_a_rejected_run_that_did_nothing_to_undo_is_led_by_terminate():
    run = _rejected("test-approval", prepare=StepStatus.SUCCEEDED, approve=StepStatus.FAILED)
    assert ACTIONS["compensate"].refusal(run, _steps(run)) is not None
    advice = recommend(run, _steps(run))
    assert advice.action is not None and advice.action.name == "terminate"
    assert "not possible now" not in advice.why and "resume" in advice.why

    advice.action.perform(run.pk, actor=OLGA, given=ActionInput(reason="vendor refused"))
    run = Run.objects.get(pk=run.pk)
    # finished_at is the database's time as this process estimates it, which may read a
    # millisecond past this host's own clock: set, not compared with the host's.
    assert run.status == RunStatus.TERMINATED and run.finished_at is not None


def test_a_rejected_run_with_a_step_to_undo_is_led_by_compensate():
    run = _rejected("test-orders", fetch=StepStatus.SUCCEEDED,
                    **{"create-task": StepStatus.SUCCEEDED})
    advice = recommend(run, _steps(run))
    assert advice.action is not None and advice.action.name == "compensate"
    transitions.compensate(run.pk, actor=OLGA, reason="rejected")
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPENSATING
