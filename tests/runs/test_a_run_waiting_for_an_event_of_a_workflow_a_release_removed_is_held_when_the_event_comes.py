"""A run waited for an event (its timeout weeks away) when a release removed its workflow
(or that version) without waiting for its open runs. The event, when it came, was refused
("unknown workflow") and the run went on waiting as if nothing had come, until its timeout:
nobody was told that its event had come and been turned away. The run is now held for a
person as soon as such an event comes (definition_missing, naming the event and the
version), as for a wait a release renamed; the sender is still refused and nothing is
delivered. Once the code is back, Resume has it wait again, and the event sent again is
delivered."""

from datetime import timedelta

import pytest

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, ExternalEvent, RunStatus, Step, StepStatus
from runs.waiting import events
from runs.waiting.payloads import EventRefused
from tests.factories import new_run

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
PSP = Actor.system("psp")
PAID = {"amount": 5, "reference": "PSP-9"}


def _send(run, event_id):
    return events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                key=run.business_key, event_id=event_id, source="psp",
                                payload=PAID, actor=PSP)


@pytest.fixture
def workflow():
    workflow = registry.get("test-payment-wait", 1)
    yield workflow
    registry.register(workflow)  # whatever the test did


def test_the_run_is_held_when_its_event_comes_and_goes_on_once_the_code_is_back(
        script, monkeypatch, workflow):
    monkeypatch.setattr(workflow.step("payment"), "timeout", timedelta(weeks=6))
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert Step.objects.get(run=run, name="payment").next_attempt_at > run.created_at + \
        timedelta(weeks=5)
    monkeypatch.undo()
    registry.unregister(workflow)  # the release

    with pytest.raises(EventRefused, match="unknown workflow 'test-payment-wait'"):
        _send(run, "evt-1")

    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.DEFINITION_MISSING)
    assert "test-payment-wait v1 is not registered" in run.status_message
    assert "payment.settled" in run.status_message
    assert (run.next_wake_at, run.lease_owner) == (None, "")
    payment = Step.objects.get(run=run, name="payment")
    assert payment.status == StepStatus.WAITING  # nothing delivered
    assert not ExternalEvent.objects.exists()
    held = AuditRecord.objects.filter(run=run, action=AuditAction.DEFINITION_MISSING)
    assert held.count() == 1 and held.get().step_name == "payment"
    # Sent again while it is held: refused again, held once.
    with pytest.raises(EventRefused):
        _send(run, "evt-2")
    assert held.count() == 1
    assert _calls(script) == ["invoice"]

    registry.register(workflow)  # rolled back
    transitions.resume(run.pk, actor=OLGA, reason="the release was rolled back")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    assert _send(run, "evt-3").status == "delivered"
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    assert _calls(script) == ["invoice", "book"]


def _calls(script) -> list[str]:
    return [name for name, *_ in script.calls]
