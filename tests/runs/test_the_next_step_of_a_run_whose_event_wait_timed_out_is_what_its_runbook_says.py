"""A run whose event wait timed out is led by the action its runbook section gives
(docs/operations.md, event_timed_out), one the run accepts: under "escalate" the step still
waits, and the next step is Deliver event (Skip event beside it); under "fail" the step
failed, Deliver and Skip are refused, and the next step is Resume, which waits for the event
again with a new deadline, after which Deliver event is accepted."""

from datetime import timedelta

import pytest
from django.utils import timezone

from audit.chain import Actor
from runs.execution import executor
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.guidance import recommend
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def _timed_out(workflow: str) -> Run:
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    past = timezone.now() - timedelta(minutes=5)
    Step.objects.filter(run=run, name="payment").update(next_attempt_at=past)
    Run.objects.filter(pk=run.pk).update(next_wake_at=past)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.EVENT_TIMED_OUT
    return run


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def test_under_escalate_the_next_step_is_deliver_event_and_skip_is_named(script):
    run = _timed_out("test-payment-wait")
    advice = recommend(run, _steps(run))
    assert advice.action is not None and advice.action.name == "event_received"
    assert advice.action.label == "Deliver event"
    assert ACTIONS["event_received"].refusal(run, _steps(run)) is None
    assert ACTIONS["skip_event"].refusal(run, _steps(run)) is None
    assert "payment.settled" in advice.why and "skip the event" in advice.why
    assert "not possible now" not in advice.why


def test_under_fail_the_next_step_is_resume_which_waits_again_with_a_new_deadline(script):
    run = _timed_out("test-payment-fail")
    assert step(run, "payment").status == StepStatus.FAILED
    advice = recommend(run, _steps(run))
    assert advice.action is not None and advice.action.name == "resume"
    assert "payment.settled" in advice.why and "new deadline" in advice.why
    # What the runbook says of "fail": Deliver and Skip are refused while the step failed.
    for refused in ("event_received", "skip_event"):
        assert ACTIONS[refused].refusal(run, _steps(run)) is not None

    ACTIONS["resume"].perform(run.pk, actor=OLGA, given=ActionInput(reason="asked the PSP"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run = Run.objects.get(pk=run.pk)
    assert step(run, "payment").status == StepStatus.WAITING
    assert step(run, "payment").next_attempt_at > timezone.now()
    assert ACTIONS["event_received"].refusal(run, _steps(run)) is None
    assert [name for name, *_ in script.calls] == ["invoice"]  # "book" never ran
