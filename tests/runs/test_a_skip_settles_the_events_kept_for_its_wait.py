"""A person who skips the event a run waits for (Skip event) settles the wait as a delivery
by hand does: every kept event that wait would have consumed (under the name it waits for
or, where a release renamed its event, under the new name, with the same key) is marked
consumed by that skip, in its transaction, and named in its event_skipped record. None of
them reaches a later wait of the run (a re-run from the step) as if it had come for it; a
kept event for another key stays kept."""

import pytest

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.waiting import events
from tests.factories import new_run, step
from tests.runs.kept_events import (
    OLGA,
    answered_by_hand_then_rerun,
    assert_still_kept_for,
    assert_waits_again,
    kept_before_the_wait,
    kept_under_a_renamed_name,
    send,
)

pytestmark = pytest.mark.django_db
SKIP = ActionInput(reason="the provider says this order was paid in cash")


def _skipped_then_rerun(run) -> Run:
    """Olga skips the event; the run completes; a re-run from the wait reaches it again, and
    the worker's look for a kept event and the sweeper's pass both come by."""
    return answered_by_hand_then_rerun(
        run, "skip_event", SKIP, rerun_reason="the cash was counted wrong: wait for the payment")


def _waits_again_having_received_nothing(run, ref: str) -> None:
    assert_waits_again(run, ref)
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED).exists()


def _the_skip(run) -> AuditRecord:
    (skipped,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_SKIPPED)
    return skipped


def test_a_kept_event_under_the_awaited_name_is_settled_by_the_skip_not_rerun(script):
    run, other = kept_before_the_wait()

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
    assert_still_kept_for(other)


def test_a_kept_event_under_the_renamed_name_is_settled_by_the_skip_not_rerun(
        script, monkeypatch):
    run = kept_under_a_renamed_name(monkeypatch)

    run = _skipped_then_rerun(run)

    _waits_again_having_received_nothing(
        run, f"awaiting-event:payment.confirmed:{run.business_key}")
    assert ExternalEvent.objects.get(source="psp").consumed_run_id == run.pk
    assert _the_skip(run).data["kept_settled"] == ["psp:evt-1"]


def test_a_skip_with_nothing_kept_names_nothing_settled_and_consumes_nothing(script):
    run = new_run("test-payment-wait")
    other = new_run("test-payment-wait")
    assert send(run, "payment.settled", key=other.business_key,
                event_id="evt-other") == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    ACTIONS["skip_event"].perform(run.pk, actor=OLGA, given=SKIP)

    assert "kept_settled" not in _the_skip(run).data
    assert step(run, "payment").status == StepStatus.SKIPPED
    assert list(ExternalEvent.objects.values_list("event_id", "consumed_at")) == [
        ("evt-other", None)]
