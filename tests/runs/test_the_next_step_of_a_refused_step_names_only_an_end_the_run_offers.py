"""The next step of a run whose step the remote system refused (permanent_error) is to fix the
cause and retry; if the business no longer wants it, the end it names is one the run offers:
Compensate where something can be undone, Terminate where nothing can (a workflow that
declares no undo). A step refused for a key that holds an earlier request with other
arguments (key_reused) is led by Reconcile, as its runbook says: look up what the first
request did, and record this step's effect by hand, since a lookup by the key finds the
first request's."""

import pytest

from runs.models import AttentionReason, ErrorClass, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS
from runs.operator.guidance import recommend
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _refused(workflow: str, step_name: str, error_class: str = ErrorClass.PERMANENT,
             **step_statuses) -> tuple[Run, list[Step]]:
    run = place(new_run(workflow), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.PERMANENT_ERROR,
                status_message=f"{step_name}: HTTP 403", step_statuses={
                    **step_statuses, step_name: StepStatus.FAILED})
    Step.objects.filter(run=run, name=step_name).update(error_class=error_class,
                                                        error_message="HTTP 403")
    return run, list(Step.objects.filter(run=run).order_by("position"))


def test_a_refused_step_of_a_run_with_nothing_to_undo_names_terminate_not_compensate():
    run, steps = _refused("test-tracker-a", "create-task")
    assert ACTIONS["compensate"].refusal(run, steps) is not None
    advice = recommend(run, steps)
    assert advice.meant == "retry_step" and advice.step == "create-task"
    assert "terminate the run instead" in advice.why and "compensate" not in advice.why


def test_a_refused_step_of_a_run_with_an_undo_to_send_names_compensate():
    run, steps = _refused("test-orders", "post-ledger", fetch=StepStatus.SUCCEEDED,
                          classify=StepStatus.SUCCEEDED,
                          **{"create-task": StepStatus.SUCCEEDED})
    assert ACTIONS["compensate"].refusal(run, steps) is None
    advice = recommend(run, steps)
    assert advice.meant == "retry_step" and "compensate instead" in advice.why


def test_a_step_refused_for_a_reused_key_is_led_by_reconcile_by_hand():
    run, steps = _refused("test-tracker-a", "create-task", ErrorClass.KEY_REUSED)
    advice = recommend(run, steps)
    assert advice.meant == "reconcile" and advice.action is not None
    assert advice.step == "create-task"
    assert "earlier request under create-task's key" in advice.why
    assert "record it by hand with evidence" in advice.why
    assert "terminate the run" in advice.why and "compensate" not in advice.why
