"""A release renamed, under a running run (no new version), the event its wait is for, or
the step that waits. The run's row still waits under the old name: an event under the new
name finds no run and is kept, one under the old name is refused at the door. The run is
held for a person as soon as such an event comes (or when it is claimed: its timeout, a
resume), saying which step and both names; nothing is delivered to it on a guess. A person
delivers the event by hand or skips it; the code rolled back, the run waits and goes on."""

import pytest

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import registry
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import AttentionReason, ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.waiting import events
from runs.waiting.payloads import EventRefused
from tests.factories import make_due, new_run, step

pytestmark = pytest.mark.django_db
PSP = Actor.system("payments")
OLGA = Actor(kind="user", label="olga")
PAID = {"amount": 5, "reference": "PSP-9"}


def _waiting(workflow="test-payment-wait") -> Run:
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return Run.objects.get(pk=run.pk)


def _send(run, event, event_id="evt-1"):
    return events.receive_event(workflow=run.workflow_name, event=event, key=run.business_key,
                                event_id=event_id, source="psp", payload=PAID, actor=PSP)


def _renamed(monkeypatch, workflow="test-payment-wait", **change):
    for field, value in change.items():
        monkeypatch.setattr(registry.get(workflow, 1).step("payment"), field, value)


def _held(run, *names) -> AuditRecord:
    """Held for a person, once, with a message naming the step and each of `names`; its
    step still waits under its old name, nothing delivered to it."""
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.DEFINITION_MISSING)
    assert run.status_message.startswith("payment: waits for the event payment.settled")
    for name in names:
        assert name in run.status_message
    assert (run.lease_owner, run.next_wake_at) == ("", None)
    payment = step(run, "payment")
    assert (payment.status, payment.remote_ref, payment.result) == (
        StepStatus.WAITING, f"awaiting-event:payment.settled:{run.business_key}", None)
    assert not ExternalEvent.objects.filter(consumed_run_id=run.pk).exists()
    (held,) = AuditRecord.objects.filter(run=run, action=AuditAction.DEFINITION_MISSING)
    assert held.step_name == "payment" and held.data["waits_for"] == "payment.settled"
    assert (held.before["status"], held.after["status"]) == (RunStatus.WAITING,
                                                              RunStatus.ATTENTION)
    return held


def test_an_event_under_the_new_name_is_kept_and_holds_the_run_that_waits_under_the_old(
        script, monkeypatch):
    run = _waiting()
    _renamed(monkeypatch, event_name="payment.confirmed")

    assert _send(run, "payment.confirmed") == events.Receipt("kept")
    held = _held(run, "payment.confirmed", "test-payment-wait v1")
    assert held.data["declared"] == "payment.confirmed"
    assert ExternalEvent.objects.get().consumed_at is None
    assert [name for name, *_ in script.calls] == ["invoice"]
    # Not claimed while it waits for a person, and the sweeper delivers nothing to it.
    assert executor.advance_run(run.pk, worker="w2") is None
    assert sweeper.sweep().events == 0

    # The person delivers the event the other system sent (its payload was kept).
    ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=ActionInput(
        reason="the provider now sends payment.confirmed", evidence='{"amount": 5, '
        '"reference": "PSP-9"}'))
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    assert step(run, "payment").result == PAID
    assert [name for name, *_ in script.calls] == ["invoice", "book"]


def test_an_event_under_the_old_name_is_refused_and_holds_the_run(script, monkeypatch):
    run = _waiting()
    _renamed(monkeypatch, event_name="payment.confirmed")

    with pytest.raises(EventRefused, match="no step of test-payment-wait waits"):
        _send(run, "payment.settled")
    _held(run, "payment.confirmed")
    assert not ExternalEvent.objects.exists()

    # Sent again, it is refused again; the run, with a person already, is left as it is.
    with pytest.raises(EventRefused):
        _send(run, "payment.settled", event_id="evt-2")
    _held(run, "payment.confirmed")


def test_an_event_for_a_step_a_release_renamed_is_kept_not_delivered_and_holds_the_run(
        script, monkeypatch):
    run = _waiting()
    _renamed(monkeypatch, name="payment-v2")

    assert _send(run, "payment.settled") == events.Receipt("kept")
    _held(run, "has no event step payment", "payment-v2", "skip the event")
    assert [name for name, *_ in script.calls] == ["invoice"]

    ACTIONS["skip_event"].perform(run.pk, actor=OLGA,
                                  given=ActionInput(reason="paid, confirmed by phone"))
    assert step(run, "payment").status == StepStatus.SKIPPED


def test_a_run_that_reaches_its_timeout_under_a_renamed_wait_is_held_not_given_the_default(
        script, monkeypatch):
    run = _waiting("test-payment-continue")
    _renamed(monkeypatch, "test-payment-continue", event_name="payment.confirmed")

    make_due(run)
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.ATTENTION
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.DEFINITION_MISSING
    assert "payment.settled" in run.status_message
    assert "payment.confirmed" in run.status_message
    assert step(run, "payment").status == StepStatus.WAITING
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_TIMED_OUT).exists()
    assert [name for name, *_ in script.calls] == ["invoice"]
    # The same hold, and the same record, as when an event finds it.
    held = AuditRecord.objects.get(run=run, action=AuditAction.DEFINITION_MISSING)
    assert held.step_name == "payment"
    assert (held.data["waits_for"], held.data["declared"]) == ("payment.settled",
                                                               "payment.confirmed")


def test_resumed_once_the_release_is_rolled_back_the_run_waits_and_its_event_comes(
        script, monkeypatch):
    run = _waiting()
    _renamed(monkeypatch, event_name="payment.confirmed")
    assert _send(run, "payment.confirmed") == events.Receipt("kept")
    _held(run, "payment.confirmed")

    # Resumed under the same code: held again at the claim, nothing delivered.
    transitions.resume(run.pk, actor=OLGA, reason="try again")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.ATTENTION
    assert step(run, "payment").status == StepStatus.WAITING

    monkeypatch.undo()
    transitions.resume(run.pk, actor=OLGA, reason="release rolled back")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    assert _send(run, "payment.settled", event_id="evt-2") == events.Receipt("delivered", run.pk)
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED


def test_only_the_run_the_event_is_for_is_held(script, monkeypatch):
    run, other = _waiting(), _waiting()
    _renamed(monkeypatch, event_name="payment.confirmed")
    assert _send(run, "payment.confirmed") == events.Receipt("kept")
    _held(run, "payment.confirmed")
    other.refresh_from_db()
    assert other.status == RunStatus.WAITING
    assert not AuditRecord.objects.filter(run=other,
                                          action=AuditAction.DEFINITION_MISSING).exists()
