"""A four-eyes request shows its approver the high-impact effects that stand or may stand in
its run; an approval applies only to what it showed. When those effects change while it
waits (another operator settles one), a person's decision supersedes it. The sweep's
reminder and timeout must do the same: before, they never compared the effects, so the
approvers were reminded about effects that were no longer the run's, and the timeout
cancelled the request on what nobody had been shown. Now the reminder, the timeout and a
late decision all supersede it, by the one check (payload_check.payload_outcome): a new
request asks about the effects as they are now. Unchanged, it is reminded and timed out as
before."""

import uuid

import pytest

from approvals import four_eyes, notifications, schedule
from approvals.decisions import decide
from approvals.models import ApprovalRequest, Notification, NotificationKind, RequestStatus
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import Found
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.approvals.conftest import later
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

CARL = Actor(kind=AuditRecord.ActorKind.USER, label="carl", user_id=None)
SHOWN = ["post-ledger: outcome unknown: may have happened"]


def _asked(operators, t0, mailoutbox) -> ApprovalRequest:
    """olga asks to terminate a run whose ledger posting may have happened; omar is mailed."""
    olga, _ = operators
    run = place(new_run(), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.UNKNOWN_OUTCOME,
                step_statuses={"fetch": StepStatus.SUCCEEDED,
                               "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.UNKNOWN})
    request, created = four_eyes.request_operator_action(
        run, action="terminate", requested_by=olga, reason="order withdrawn", now=t0)
    assert created and request.snapshot["high_impact_effects"] == SHOWN
    assert notifications.publish_notifications(now=t0).sent == 1
    mailoutbox.clear()
    return request


def _ledger_settled(request: ApprovalRequest, t0) -> None:
    """Another operator finds the ledger entry: the effect the request shows as unknown is
    now known to have happened."""
    transitions.reconcile(request.run_id, step_name="post-ledger", verdict=Found("LE-7"),
                          actor=CARL, reason="entry found in the ledger",
                          evidence="ledger UI shows LE-7", now=later(t0, minutes=1))


def _records(request: ApprovalRequest, action: str):
    return AuditRecord.objects.filter(run_id=request.run_id, action=action)


def _superseded(request: ApprovalRequest, at, mailoutbox) -> ApprovalRequest:
    """The request superseded by one about the effects as they are now, due after its own
    timeout, and nothing else done with it: no reminder, no escalation, no decision."""
    request.refresh_from_db()
    assert request.status == RequestStatus.SUPERSEDED
    assert (request.decided_by, request.decided_by_label, request.decision_id) == \
        (None, "", None)
    assert (request.reminder_count, request.escalation_level) == (0, 0)
    new = ApprovalRequest.objects.get(pk=request.superseded_by_id)
    assert new.status == RequestStatus.PENDING
    assert new.snapshot["high_impact_effects"] == ["post-ledger: succeeded"]
    assert new.requested_at == at and new.due_at == at + request.timeout
    assert not Notification.objects.filter(
        kind__in=[NotificationKind.REMINDER, NotificationKind.ESCALATION]).exists()
    for never in ("approval_reminded", "approval_escalated", "approval_decided",
                  "approval_timed_out", "terminated"):
        assert not _records(request, never).exists(), never
    assert _records(request, "approval_superseded").count() == 1
    # The run stays as the reconcile left it: nothing cancelled or terminated it.
    assert Run.objects.get(pk=request.run_id).status == RunStatus.QUEUED
    # omar is asked about the new request alone, never reminded about the old one.
    notifications.publish_notifications(now=at)
    assert [m.to[0] for m in mailoutbox] == ["omar@example.com"]
    assert all(f"/approvals/{new.pk}/link/" in m.body for m in mailoutbox)
    assert not any(f"/approvals/{request.pk}/link/" in m.body for m in mailoutbox)
    return new


def test_effects_changed_the_reminder_supersedes_it_instead_of_reminding(
        operators, t0, mailoutbox):
    request = _asked(operators, t0, mailoutbox)
    _ledger_settled(request, t0)
    at = later(request.next_reminder_at, seconds=1)

    schedule.sweep(now=at)

    _superseded(request, at, mailoutbox)


def test_effects_unchanged_the_approvers_are_reminded(operators, t0, mailoutbox):
    request = _asked(operators, t0, mailoutbox)
    at = later(request.next_reminder_at, seconds=1)

    report = schedule.sweep(now=at)

    assert report.reminded == 1 and report.superseded == 0
    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.reminder_count == 1
    assert request.snapshot["high_impact_effects"] == SHOWN
    assert _records(request, "approval_reminded").count() == 1
    assert Notification.objects.filter(request=request,
                                       kind=NotificationKind.REMINDER).count() == 1
    assert [m.to[0] for m in mailoutbox] == ["omar@example.com"]
    assert f"/approvals/{request.pk}/link/" in mailoutbox[0].body


def test_effects_changed_the_timeout_supersedes_it_instead_of_timing_it_out(
        operators, t0, mailoutbox):
    request = _asked(operators, t0, mailoutbox)
    _ledger_settled(request, t0)
    due = later(request.due_at, seconds=1)

    report = schedule.sweep(now=due)

    assert (report.escalated, report.timed_out, report.withdrawn) == (0, 0, 0)
    assert report.superseded == 1
    new = _superseded(request, due, mailoutbox)
    # The next pass finds nothing due: the new request waits for a decision of its own.
    report = schedule.sweep(now=later(due, minutes=1))
    assert (report.escalated, report.timed_out, report.superseded) == (0, 0, 0)
    new.refresh_from_db()
    assert new.status == RequestStatus.PENDING


def test_effects_changed_a_late_decision_supersedes_it_as_the_timeout_would(
        operators, t0, mailoutbox):
    _, omar = operators
    request = _asked(operators, t0, mailoutbox)
    _ledger_settled(request, t0)
    due = later(request.due_at, seconds=1)

    said = decide(request.pk, user=omar, approved=True, comment="agreed",
                  decision_id=uuid.uuid4(), now=due)

    assert said.outcome == "superseded", said.message
    assert said.new_request == _superseded(request, due, mailoutbox)


def test_effects_unchanged_the_timeout_applies(operators, t0, mailoutbox):
    request = _asked(operators, t0, mailoutbox)
    due = later(request.due_at, seconds=1)

    report = schedule.sweep(now=due)

    assert (report.timed_out, report.superseded, report.escalated) == (1, 0, 0)
    request.refresh_from_db()
    assert request.status == RequestStatus.EXPIRED and request.decided_by is None
    (decided,) = _records(request, "approval_decided")
    assert (decided.actor_kind, decided.data["decision"]) == ("system", "expired")
    assert not ApprovalRequest.objects.filter(superseded_by__isnull=False).exists()
    assert Run.objects.get(pk=request.run_id).status == RunStatus.ATTENTION
