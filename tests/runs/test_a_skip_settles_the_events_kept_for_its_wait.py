"""A person who skips the event a run waits for (Skip event) settles the wait as a delivery
by hand does: every kept event that wait would have consumed (under the name it waits for
or, where a release renamed its event, under the new name, with the same key) is marked
consumed by that skip, in its transaction, and named in its event_skipped record. None of
them reaches a later wait of the run (a re-run from the step) as if it had come for it; a
kept event for another key stays kept."""

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
from runs.waiting.kept import consume_kept_for_run
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
PSP = Actor.system("payments")
OLGA = Actor(kind="user", label="olga")
PAID = {"amount": 5, "reference": "PSP-9"}
SKIP = ActionInput(reason="the provider says this order was paid in cash")


def _send(run, event, *, key=None, event_id="evt-1"):
    return events.receive_event(workflow=run.workflow_name, event=event,
                                key=key or run.business_key, event_id=event_id, source="psp",
                                payload=PAID, actor=PSP)


def _skipped_then_rerun(run) -> Run:
    """Olga skips the event; the run completes; a re-run from the wait reaches it again, and
    the worker's look for a kept event and the sweeper's pass both come by."""
    ACTIONS["skip_event"].perform(run.pk, actor=OLGA, given=SKIP)
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    transitions.rerun_from_step(run.pk, step_name="payment", actor=OLGA,
                                reason="the cash was counted wrong: wait for the payment")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    assert not consume_kept_for_run(run.pk)
    assert sweeper.sweep().events == 0
    return Run.objects.get(pk=run.pk)


def _waits_again_having_received_nothing(run, ref: str) -> None:
    payment = step(run, "payment")
    assert (payment.status, payment.remote_ref, payment.result) == (StepStatus.WAITING, ref,
                                                                    None)
    assert run.status == RunStatus.WAITING
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED).exists()


def _the_skip(run) -> AuditRecord:
    (skipped,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_SKIPPED)
    return skipped


def test_a_kept_event_under_the_awaited_name_is_settled_by_the_skip_not_rerun(script):
    run = new_run("test-payment-wait")
    other = new_run("test-payment-wait")
    # Kept before the run waited, and the worker's look for it after the wait was lost.
    assert _send(run, "payment.settled") == events.Receipt("kept")
    assert _send(run, "payment.settled", key=other.business_key,
                 event_id="evt-other") == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    run = _skipped_then_rerun(run)

    _waits_again_having_received_nothing(
        run, f"awaiting-event:payment.settled:{run.business_key}")
    kept = ExternalEvent.objects.get(event_id="evt-1")
    skipped = _the_skip(run)
    assert (kept.consumed_run_id, kept.consumed_step, kept.consumed_at) == (
        run.pk, "payment", skipped.created_at)
    assert skipped.data["kept_settled"] == ["psp:evt-1"]
    assert skipped.reason == SKIP.reason
    # The event for another run's key was not taken by this skip.
    assert ExternalEvent.objects.get(event_id="evt-other").consumed_at is None
    assert executor.advance_run(other.pk, worker="w1") == RunStatus.WAITING
    assert consume_kept_for_run(other.pk)


def test_a_kept_event_under_the_renamed_name_is_settled_by_the_skip_not_rerun(
        script, monkeypatch):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    # A release renames the event under the waiting run; the sender uses the new name.
    monkeypatch.setattr(registry.get("test-payment-wait", 1).step("payment"), "event_name",
                        "payment.confirmed")
    assert _send(run, "payment.confirmed") == events.Receipt("kept")
    run.refresh_from_db()
    assert run.attention_reason == AttentionReason.DEFINITION_MISSING

    run = _skipped_then_rerun(run)

    _waits_again_having_received_nothing(
        run, f"awaiting-event:payment.confirmed:{run.business_key}")
    assert ExternalEvent.objects.get(source="psp").consumed_run_id == run.pk
    assert _the_skip(run).data["kept_settled"] == ["psp:evt-1"]


def test_a_skip_with_nothing_kept_names_nothing_settled_and_consumes_nothing(script):
    run = new_run("test-payment-wait")
    other = new_run("test-payment-wait")
    assert _send(run, "payment.settled", key=other.business_key,
                 event_id="evt-other") == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    ACTIONS["skip_event"].perform(run.pk, actor=OLGA, given=SKIP)

    assert "kept_settled" not in _the_skip(run).data
    assert step(run, "payment").status == StepStatus.SKIPPED
    assert list(ExternalEvent.objects.values_list("event_id", "consumed_at")) == [
        ("evt-other", None)]
