"""A wait that failed (its event did not come in time, its approval was rejected by its
timeout policy) and, asked again by a person, then ends well keeps no error of that earlier
try: the step succeeded, and its row, which show_run prints beside it, holds no error, as an
effect's row holds none once it succeeded."""

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from audit.chain import Actor
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def _advance(run: Run) -> Run:
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk)


def _resume(run: Run) -> Run:
    ACTIONS["resume"].perform(run.pk, actor=OLGA, given=ActionInput(reason="asked again"))
    run = _advance(run)
    assert run.status == RunStatus.WAITING
    return run


def _step_line(run: Run, name: str) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), stdout=out)
    return next(line for line in out.getvalue().splitlines()
                if line.startswith(f"  {name} "))


def test_an_event_wait_that_timed_out_and_then_got_its_event_keeps_no_error(script):
    run = _advance(new_run("test-payment-fail"))
    past = timezone.now() - timedelta(minutes=5)
    Step.objects.filter(run=run, name="payment").update(next_attempt_at=past)
    Run.objects.filter(pk=run.pk).update(next_wake_at=past)
    run = _advance(run)
    assert run.attention_reason == AttentionReason.EVENT_TIMED_OUT
    assert step(run, "payment").error_message.startswith("no payment.settled event arrived")

    run = _resume(run)
    transitions.deliver_event(run.pk, step_name="payment", source="psp", event_id="evt-1",
                              payload={"amount": 12, "reference": "psp-1"},
                              actor=Actor.system("psp"))
    run = _advance(run)

    assert run.status == RunStatus.COMPLETED
    payment = step(run, "payment")
    assert (payment.status, payment.error_class, payment.error_message) == (
        StepStatus.SUCCEEDED, "", "")
    assert "arrived" not in _step_line(run, "payment")


def test_an_approval_its_timeout_rejected_then_given_keeps_no_error(script):
    run = _advance(new_run("test-approval"))
    assert step(run, "approve").status == StepStatus.WAITING
    # As the approvals sweep applies the "reject" timeout policy (approvals.application).
    transitions.decide_approval(run.pk, step_name="approve", approved=False,
                                actor=Actor.system("approvals"),
                                comment="no decision within 3.0 days: rejected by the "
                                        "timeout policy")
    assert step(run, "approve").error_message.startswith("rejected by approvals")

    run = _resume(run)
    transitions.decide_approval(run.pk, step_name="approve", approved=True,
                                actor=Actor.system("ann"), comment="checked")
    run = _advance(run)

    assert run.status == RunStatus.COMPLETED
    approve = step(run, "approve")
    assert (approve.status, approve.error_class, approve.error_message) == (
        StepStatus.SUCCEEDED, "", "")
    assert "rejected" not in _step_line(run, "approve")
