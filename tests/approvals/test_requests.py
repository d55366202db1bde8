"""Opening requests: the sweeper notices a run waiting at its approval step and opens one
request, with its permissions and notifications, in one transaction."""

import pytest
from django.contrib.auth.models import Group, User

from approvals import notifications, requests, schedule
from approvals.models import (
    DECIDE_PERMISSION,
    ApprovalRequest,
    ApprovalRequestGroupObjectPermission,
    ApprovalRequestUserObjectPermission,
    Notification,
)
from approvals.snapshots import canonical_json, snapshot_hash
from audit.chain import Actor
from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import RunStatus, StepStatus
from tests.approvals.conftest import later, waiting_run
from tests.factories import place, step

pytestmark = pytest.mark.django_db


def _perm_rows():
    return (ApprovalRequestUserObjectPermission.objects.count()
            + ApprovalRequestGroupObjectPermission.objects.count())


def test_a_run_at_its_approval_step_gets_one_request_while_no_worker_is_held(approvers, ann,
                                                                             bob, carol, t0):
    run = waiting_run(amount=250)
    assert run.lease_owner == "" and run.lease_expires_at is None
    assert step(run, "approve").status == StepStatus.WAITING
    # runs knows nothing of approvals: until the sweeper looks, there is no request.
    assert ApprovalRequest.objects.count() == 0
    audit_before = AuditRecord.objects.filter(run=run).count()

    assert requests.open_pending_requests(now=t0) == 1

    request = ApprovalRequest.objects.get()
    assert request.run_id == run.pk and request.step_name == "approve"
    assert request.status == "pending" and request.kind == "step"
    assert request.snapshot == {"order": run.business_key, "amount": 250}
    assert request.snapshot_hash == snapshot_hash(request.snapshot)
    assert len(request.snapshot_hash) == 64
    assert canonical_json(request.snapshot) == f'{{"amount":250,"order":"{run.business_key}"}}'
    assert request.requested_at == t0
    assert request.due_at == later(t0, days=3)            # the step's declared timeout
    assert request.next_reminder_at == later(t0, hours=24)
    assert request.approvers == ["group:approvers"] and request.problem == ""
    assert ann.has_perm(DECIDE_PERMISSION, request) and bob.has_perm(DECIDE_PERMISSION, request)
    assert not User.objects.get(pk=carol.pk).has_perm(DECIDE_PERMISSION, request)
    notes = Notification.objects.order_by("recipient")
    assert [(n.recipient, n.kind, n.status) for n in notes] == [
        ("ann@example.com", "request", "pending"), ("bob@example.com", "request", "pending")]
    assert all(n.message_id and n.provider_message_id == "" for n in notes)

    # The run's state is untouched (still waiting, nobody holds it); its chain records that
    # the request was opened, for whom and until when.
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.lease_owner == ""
    [opened] = AuditRecord.objects.filter(run=run).order_by("seq")[audit_before:]
    assert opened.action == "approval_opened" and opened.step_name == "approve"
    assert opened.data["approval_request"] == request.pk
    assert opened.data["approvers"] == ["group:approvers"]
    assert opened.data["payload_hash"] == request.snapshot_hash

    # Another sweep (or two at once) opens nothing more.
    assert requests.open_pending_requests(now=later(t0, seconds=2)) == 0
    assert ApprovalRequest.objects.count() == 1 and Notification.objects.count() == 2


def test_the_request_its_permissions_and_its_notifications_commit_together_or_not_at_all(
        approvers, monkeypatch, caplog):
    run = waiting_run()

    def outbox_down(*args, **kwargs):
        raise RuntimeError("outbox insert failed")

    monkeypatch.setattr(notifications, "_queue_notifications", outbox_down)
    assert requests.open_pending_requests() == 0          # logged, not raised
    assert "not opened; will retry" in caplog.text
    assert ApprovalRequest.objects.count() == 0
    assert Notification.objects.count() == 0
    assert _perm_rows() == 0
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING

    monkeypatch.undo()
    assert requests.open_pending_requests() == 1
    assert ApprovalRequest.objects.count() == 1
    assert Notification.objects.count() == 2 and _perm_rows() == 1


def test_an_unknown_approver_group_is_recorded_on_the_request_and_the_sweep_goes_on(t0, caplog):
    Group.objects.filter(name="approvers").delete()  # made by the roles migration
    first, second = waiting_run(), waiting_run()
    assert requests.open_pending_requests(now=t0) == 2
    for request in ApprovalRequest.objects.all():
        assert request.status == "pending"
        assert request.problem == "unknown group 'approvers'"
    assert Notification.objects.count() == 0 and _perm_rows() == 0
    assert "unknown group 'approvers'" in caplog.text

    # Once the group exists, the next reminder grants and notifies it.
    ann = User.objects.create_user("ann", email="ann@example.com")
    ann.groups.add(Group.objects.create(name="approvers"))
    assert schedule.send_reminders(now=later(t0, hours=24)) == 2
    for request in ApprovalRequest.objects.all():
        assert request.problem == "" and request.reminder_count == 1
        assert User.objects.get(pk=ann.pk).has_perm(DECIDE_PERMISSION, request)
    assert Notification.objects.filter(recipient="ann@example.com").count() == 2
    assert {first.pk, second.pk} == set(ApprovalRequest.objects.values_list("run_id", flat=True))


def test_approvers_without_an_email_address_are_granted_and_named_as_the_problem(db, t0):
    nomail = User.objects.create_user("nomail")
    nomail.groups.add(Group.objects.get_or_create(name="approvers")[0])
    waiting_run()
    requests.open_pending_requests(now=t0)
    request = ApprovalRequest.objects.get()
    assert request.problem == "nomail has no email address"
    assert Notification.objects.count() == 0
    assert User.objects.get(pk=nomail.pk).has_perm(DECIDE_PERMISSION, request)


def test_a_request_whose_run_stops_waiting_is_withdrawn_and_its_emails_not_sent(pending, t0,
                                                                                mailoutbox):
    transitions.terminate(pending.run_id, actor=Actor.system("test"), reason="customer left")
    assert schedule.withdraw_stale_requests(now=t0) == 1
    pending.refresh_from_db()
    assert pending.status == "withdrawn" and pending.settled_at == t0
    assert "the run ended: it was terminated" in pending.comment
    report = notifications.publish_notifications(now=t0)
    assert report.sent == 0 and report.skipped == 2 and mailoutbox == []
    assert set(Notification.objects.values_list("status", flat=True)) == {"skipped"}
    # Nothing is opened again for a terminated run.
    assert requests.open_pending_requests(now=t0) == 0
    assert ApprovalRequest.objects.count() == 1


def test_a_run_passing_through_queued_keeps_its_request(pending, t0):
    """Queued and running are passing states: a run in them, its step still waiting, goes
    back to waiting on the same step, and the request stays as it is. (An operator's resume
    does not take a run waiting for a decision there: its request decides it.)"""
    place(pending.run, status=RunStatus.QUEUED)
    assert schedule.withdraw_stale_requests(now=t0) == 0
    pending.refresh_from_db()
    assert pending.status == "pending"
