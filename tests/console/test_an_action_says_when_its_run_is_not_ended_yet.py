"""What an action tells the person who took it, where "done" would mislead: a cancel of a
run with a step in flight is only asked for (the run stops at the next step boundary); a
run cancelled or terminated while an effect's outcome is unknown is not terminated yet (it
waits in attention for that effect to be settled, and says which); settling the last such
effect terminates it, where a reconcile otherwise sends a run on."""

import pytest

from approvals.operator_actions import act
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput, offered
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

UNKNOWN_TASK = {"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.SUCCEEDED,
                "create-task": StepStatus.UNKNOWN}


def _found(step="create-task"):
    return ActionInput(reason="checked", step=step, mode="found", remote_ref="T-1",
                       evidence="seen in the tracker")


def test_a_cancel_of_a_run_with_a_step_in_flight_says_it_is_only_asked_for(operator):
    run = place(new_run(), status=RunStatus.RUNNING, step_statuses={"fetch": StepStatus.RUNNING})
    outcome = act("cancel", run.pk, user=operator, given=ActionInput(reason="withdrawn"))
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.RUNNING and run.cancel_requested
    assert "done" not in outcome.message.replace("not done yet", "")
    assert outcome.message.startswith("Cancel: asked for, not done yet")
    assert "next step boundary" in outcome.message


def test_a_cancel_with_nothing_in_flight_is_done(operator):
    run = place(new_run(), status=RunStatus.ATTENTION)
    outcome = act("cancel", run.pk, user=operator, given=ActionInput(reason="withdrawn"))
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert outcome.message == "Cancel: done."


@pytest.mark.parametrize("action", ["cancel", "terminate"])
def test_ending_a_run_with_an_unknown_outcome_says_it_is_not_terminated_yet(operator, action):
    run = place(new_run(), status=RunStatus.ATTENTION, step_statuses=UNKNOWN_TASK)
    outcome = act(action, run.pk, user=operator, given=ActionInput(reason="stop"))
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    assert "not terminated yet" in outcome.message
    assert "create-task" in outcome.message and "Reconcile" in outcome.message


def test_settling_the_last_unknown_effect_of_an_ended_run_terminates_it_and_says_so(operator):
    run = place(new_run(), status=RunStatus.ATTENTION, step_statuses=UNKNOWN_TASK)
    act("terminate", run.pk, user=operator, given=ActionInput(reason="stop"))
    run = Run.objects.get(pk=run.pk)
    steps = list(run.steps.order_by("position"))
    # The dialog does not promise that the run continues.
    summary = ACTIONS["reconcile"].explain(run, steps)[0]
    assert "never continues" in summary and "terminated" in summary
    assert [a.name for a in offered(run, steps)] == ["reconcile"]

    outcome = act("reconcile", run.pk, user=operator, given=_found())
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert outcome.message.startswith("Reconcile: done.")
    assert "terminated now" in outcome.message


def test_a_reconcile_of_a_run_nobody_ended_says_done_alone(operator):
    run = place(new_run(), status=RunStatus.ATTENTION, step_statuses=UNKNOWN_TASK)
    outcome = act("reconcile", run.pk, user=operator, given=_found())
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
    assert outcome.message == "Reconcile: done."
