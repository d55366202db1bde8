"""A run whose compensation has begun waits for nothing that would send it forward: its
event wait ends (skipped) when the compensation starts, so an event that arrives while the
compensation is paused before a high-impact undo is kept, not delivered; a person can
neither deliver one by hand nor skip the wait; and the run ends compensated, the charge
refunded once and nothing shipped."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.waiting import events
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA, BOB = Actor(kind="user", label="olga"), Actor(kind="user", label="bob")
PAID = {"amount": 120, "reference": "PSP-77"}


def test_an_event_never_sends_a_run_being_undone_forward(script):
    run = new_run("test-charge-then-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    transitions.compensate(run.pk, actor=OLGA, reason="customer cancelled", approved_by=BOB)
    assert step(run, "payment").status == StepStatus.SKIPPED
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED

    receipt = events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                   key=run.business_key, event_id="evt-1", source="psp",
                                   payload=PAID, actor=Actor.system("payments"))
    assert receipt.status == "kept"
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED
    steps = list(run.steps.all())
    for forward in ("event_received", "skip_event"):
        assert ACTIONS[forward].refusal(run, steps), forward
    with pytest.raises(TransitionNotAllowed):
        transitions.deliver_event_by_hand(run.pk, payload=PAID, actor=OLGA, reason="by hand")
    assert not AuditRecord.objects.filter(run=run, action="event_received").exists()

    ACTIONS["confirm_compensation"].perform(run.pk, actor=OLGA, given=ActionInput(
        reason="refund checked", step="charge"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    assert [name for name, *_ in script.calls] == ["charge", "charge:compensate"]
    assert len(script.compensations) == 1
