"""A person who delivers the event a run waits for (Deliver event) settles the wait: every
kept event that wait would have consumed (under the name it waits for or, where a release
renamed its event, under the new name, with the same key) is marked consumed by that
delivery, in its transaction, and named in its audit record. None of them reaches a later
wait of the run (a re-run from the step) as if it had come for it; a kept event for another
key stays kept."""

import pytest

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run
from tests.runs.kept_events import (
    OLGA,
    answered_by_hand_then_rerun,
    assert_still_kept_for,
    assert_waits_again,
    kept_before_the_wait,
    kept_under_a_renamed_name,
)

pytestmark = pytest.mark.django_db
BY_HAND = ActionInput(reason="the provider confirmed it by phone",
                      evidence='{"amount": 7, "reference": "PHONE-1"}')


def _delivered_by_hand_then_rerun(run) -> Run:
    """Olga delivers the event; the run completes; a re-run from the wait reaches it again,
    and the worker's look for a kept event and the sweeper's pass both come by."""
    return answered_by_hand_then_rerun(run, "event_received", BY_HAND,
                                       rerun_reason="the booking was lost: book it again")


def _waits_again_with_one_delivery(run, ref: str) -> None:
    assert_waits_again(run, ref)
    received = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED)
    assert [r.data["source"] for r in received] == ["operator"]


def test_a_kept_event_under_the_renamed_name_is_settled_by_the_hand_delivery_not_rerun(
        script, monkeypatch):
    run = kept_under_a_renamed_name(monkeypatch)
    kept = ExternalEvent.objects.get(source="psp")

    run = _delivered_by_hand_then_rerun(run)

    _waits_again_with_one_delivery(run, f"awaiting-event:payment.confirmed:{run.business_key}")
    kept.refresh_from_db()
    (by_hand,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED)
    assert (kept.consumed_run_id, kept.consumed_step, kept.consumed_at) == (
        run.pk, "payment", by_hand.created_at)
    assert by_hand.data["kept_settled"] == ["psp:evt-1"]
    # The step read the person's payload, never the kept one.
    assert [name for name, *_ in script.calls] == ["invoice", "book"]


def test_a_kept_event_under_the_awaited_name_is_settled_by_the_hand_delivery(script):
    run, other = kept_before_the_wait()

    run = _delivered_by_hand_then_rerun(run)

    _waits_again_with_one_delivery(run, f"awaiting-event:payment.settled:{run.business_key}")
    assert ExternalEvent.objects.get(event_id="evt-1").consumed_run_id == run.pk
    # The event for another run's key was not taken by this delivery.
    assert_still_kept_for(other)


def test_a_hand_delivery_with_nothing_kept_names_nothing_settled(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    ACTIONS["event_received"].perform(run.pk, actor=OLGA, given=BY_HAND)
    (by_hand,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED)
    assert "kept_settled" not in by_hand.data
    assert list(ExternalEvent.objects.values_list("source", "consumed_run_id")) == [
        ("operator", run.pk)]
