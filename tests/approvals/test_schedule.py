"""Reminders, timeouts and escalation, driven by the sweep with a controlled clock. The sweep
keeps nothing in memory: each pass reads what is due from the database."""

import uuid

import pytest
from django.contrib.auth.models import User

from approvals import decisions, notifications, schedule
from approvals.models import DECIDE_PERMISSION, ApprovalRequest, Notification
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.approvals.conftest import later, open_request, waiting_run
from tests.factories import step

pytestmark = pytest.mark.django_db


def _notes(request, kind):
    return sorted(Notification.objects.filter(request=request, kind=kind)
                  .values_list("recipient", flat=True))


def _quiet(report):
    return not any(report.as_dict().values())


def test_reminders_follow_the_interval_until_the_due_time(pending, t0):
    # test-approval: remind every 24 hours, time out after 3 days.
    notifications.publish_notifications(now=t0)
    assert _quiet(schedule.sweep(now=later(t0, hours=23, minutes=59)))
    assert _notes(pending, "reminder") == []

    report = schedule.sweep(now=later(t0, hours=24))
    assert report.reminded == 1 and report.sent == 2
    pending.refresh_from_db()
    assert pending.reminder_count == 1
    assert pending.next_reminder_at == later(t0, hours=48)
    assert _notes(pending, "reminder") == ["ann@example.com", "bob@example.com"]
    assert _quiet(schedule.sweep(now=later(t0, hours=47)))

    assert schedule.sweep(now=later(t0, hours=48)).reminded == 1
    pending.refresh_from_db()
    # The next would fall on the due time itself: the timeout comes instead.
    assert pending.reminder_count == 2 and pending.next_reminder_at is None
    assert len(_notes(pending, "reminder")) == 4
    assert _quiet(schedule.sweep(now=later(t0, hours=71, minutes=59)))
    assert pending.status == "pending"


def test_a_timeout_that_rejects_stops_the_run_in_attention(pending, t0, script):
    assert schedule.sweep(now=later(t0, days=3, seconds=-1)).timed_out == 0
    report = schedule.sweep(now=later(t0, days=3))
    assert report.timed_out == 1
    pending.refresh_from_db()
    assert pending.status == "rejected" and pending.decided_by is None
    assert pending.decided_by_label == "approvals" and pending.decided_at == later(t0, days=3)
    assert "no decision within 3 days" in pending.comment
    assert pending.settled_at is not None and pending.apply_error == ""
    run = Run.objects.get(pk=pending.run_id)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.APPROVAL_REJECTED
    record = AuditRecord.objects.get(run=run, action="approval_decided")
    assert (record.actor_kind, record.actor_label) == ("system", "approvals")
    assert record.data["approved"] is False
    assert record.data["payload_hash"] == pending.snapshot_hash
    # Nothing more happens, however often the sweep runs.
    assert _quiet(schedule.sweep(now=later(t0, days=30)))
    assert ApprovalRequest.objects.count() == 1
    assert "pay" not in [c[0] for c in script.calls]


def test_a_timeout_that_cancels_sends_the_run_to_attention_with_the_step_waiting(ann, t0):
    # test-approval-cancel: user:ann, remind every 12 hours, cancel after 1 day.
    run = waiting_run("test-approval-cancel")
    request = open_request(run, t0)
    assert _notes(request, "request") == ["ann@example.com"]
    assert schedule.sweep(now=later(t0, hours=12)).reminded == 1
    report = schedule.sweep(now=later(t0, days=1))
    assert report.timed_out == 1
    request.refresh_from_db()
    assert request.status == "expired" and request.settled_at is not None
    assert request.comment == "no decision within 24 hours"
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.APPROVAL_TIMED_OUT
    assert step(run, "approve").status == StepStatus.WAITING
    assert AuditRecord.objects.filter(run=run, action="approval_timed_out").count() == 1
    assert not AuditRecord.objects.filter(run=run, action="approval_decided").exists()
    # A late click changes nothing.
    late = decisions.decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    assert late.outcome == "closed"
    assert _quiet(schedule.sweep(now=later(t0, days=2)))

    # An operator resumes the run: it waits again, and a new request asks again.
    transitions.resume(run.pk, actor=Actor.system("ops"), reason="ask again")
    executor.advance_run(run.pk, worker="w1")
    assert schedule.sweep(now=later(t0, days=2, hours=1)).opened == 1
    assert ApprovalRequest.objects.filter(run=run, status="pending").count() == 1


def test_a_timeout_that_escalates_grants_the_deputies_and_restarts_the_reminders(
        approvers, ann, bob, dora, t0):
    # test-approval-escalate: group:approvers, remind every 8 hours, 2 days, then deputies.
    run = waiting_run("test-approval-escalate")
    request = open_request(run, t0)
    assert not User.objects.get(pk=dora.pk).has_perm(DECIDE_PERMISSION, request)
    assert schedule.sweep(now=later(t0, hours=8)).reminded == 1

    report = schedule.sweep(now=later(t0, days=2))
    assert report.escalated == 1 and report.timed_out == 0
    request.refresh_from_db()
    assert request.status == "pending" and request.escalation_level == 1
    assert request.due_at == later(t0, days=4)
    assert request.next_reminder_at == later(t0, days=2, hours=8)
    assert request.current_approvers == ["group:approvers", "group:finance-deputies"]
    assert User.objects.get(pk=dora.pk).has_perm(DECIDE_PERMISSION, request)
    assert _notes(request, "escalation") == ["dora@example.com"]
    assert run.status == RunStatus.WAITING

    # Reminders restart, now to approvers and deputies alike.
    assert schedule.sweep(now=later(t0, days=2, hours=8)).reminded == 1
    restarted = Notification.objects.filter(request=request, kind="reminder",
                                            created_at=later(t0, days=2, hours=8))
    assert sorted(restarted.values_list("recipient", flat=True)) == [
        "ann@example.com", "bob@example.com", "dora@example.com"]

    # The deputy decides.
    result = decisions.decide(request.pk, user=dora, approved=True, decision_id=uuid.uuid4(),
                              now=later(t0, days=3))
    assert result.recorded
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED


def test_after_escalation_a_second_timeout_sends_the_run_to_attention(approvers, dora, t0):
    run = waiting_run("test-approval-escalate")
    request = open_request(run, t0)
    schedule.sweep(now=later(t0, days=2))
    report = schedule.sweep(now=later(t0, days=4))
    assert report.timed_out == 1 and report.escalated == 0
    request.refresh_from_db()
    assert request.status == "expired" and request.escalation_level == 1
    assert "after escalation to group:finance-deputies" in request.comment
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.APPROVAL_TIMED_OUT


def test_a_reminder_finds_a_changed_payload_and_supersedes_the_request(pending, t0):
    from runs.models import Step

    Step.objects.filter(run_id=pending.run_id, name="prepare").update(
        result={"order": "amended"})
    assert schedule.sweep(now=later(t0, hours=24)).reminded == 1
    pending.refresh_from_db()
    assert pending.status == "superseded"
    new = pending.superseded_by
    assert new.snapshot["order"] == "amended" and new.requested_at == later(t0, hours=24)
    assert new.due_at == later(t0, days=4)
    assert _notes(pending, "reminder") == [] and len(_notes(new, "request")) == 2


def test_the_schedule_lives_in_the_database_so_a_repeated_or_restarted_sweep_does_it_once(
        pending, t0):
    """Each pass reads what is due from the rows and moves their times on in the same
    commit: a second pass at the same instant (another beat, a restarted worker) finds
    nothing to do."""
    assert schedule.sweep(now=later(t0, hours=24)).reminded == 1
    assert _quiet(schedule.sweep(now=later(t0, hours=24)))
    assert schedule.sweep(now=later(t0, days=3)).timed_out == 1
    assert _quiet(schedule.sweep(now=later(t0, days=3)))
    # The overdue second reminder is not sent: the timeout came first.
    assert Notification.objects.filter(request=pending, kind="reminder").count() == 2


def test_the_request_lifecycle_is_written_into_the_runs_hash_chained_audit_log(
        approvers, dora, t0):
    from django.core.management import call_command

    run = waiting_run("test-approval-escalate")
    approval = open_request(run, now=t0)
    schedule.sweep(now=later(t0, hours=9))     # a reminder
    schedule.sweep(now=later(t0, days=2, hours=1))  # past due: escalated to the deputies
    transitions.terminate(run.pk, actor=Actor.system("ops"), reason="order withdrawn")
    schedule.sweep(now=later(t0, days=2, hours=2))  # the run no longer waits: withdrawn

    lifecycle = [(r.action, r.data.get("approval_request")) for r in
                 AuditRecord.objects.filter(run=run, action__startswith="approval_")
                 .order_by("seq")]
    assert lifecycle == [("approval_requested", None), ("approval_opened", approval.pk),
                         ("approval_reminded", approval.pk),
                         ("approval_escalated", approval.pk),
                         ("approval_withdrawn", approval.pk)]
    escalated = AuditRecord.objects.get(run=run, action="approval_escalated")
    assert escalated.data["escalated_to"] == ["group:finance-deputies"]
    assert escalated.actor_label == "approvals"
    call_command("verify_audit")  # the chain still holds, every record linked
