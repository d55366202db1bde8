"""A run may stop waiting for a request (terminated, say) after the sweep pass's withdrawal
looked and before its reminders or timeouts come to that request. The reminder asks, with
the run and the request locked, whether the run still waits for it, as the timeout (and its
escalation) and a person's decision ask: if not, the request is withdrawn, and nobody is
reminded of, or has escalated to them, a request that can no longer be decided."""

import pytest

from approvals import schedule
from approvals.models import ApprovalRequest, Notification, NotificationKind, RequestStatus
from audit.chain import Actor
from audit.models import AuditRecord
from runs.machine import transitions
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db

OPS = Actor.system("test")


@pytest.fixture
def ended(approvers, dora, t0):
    """test-approval-escalate's request (reminders every 8 hours, deputies after 2 days),
    its run terminated since, the sweep's withdrawal not come by yet."""
    request = open_request(waiting_run("test-approval-escalate"), t0)
    transitions.terminate(request.run_id, actor=OPS, reason="customer cancelled")
    assert ApprovalRequest.objects.get(pk=request.pk).status == RequestStatus.PENDING
    return request


def _withdrawn_and_nobody_told(request, kind):
    request = ApprovalRequest.objects.get(pk=request.pk)
    assert request.status == RequestStatus.WITHDRAWN
    assert request.next_reminder_at is None
    assert request.comment.startswith("the run ended"), request.comment
    assert not Notification.objects.filter(request=request, kind=kind).exists()
    records = AuditRecord.objects.filter(run_id=request.run_id)
    assert records.filter(action="approval_withdrawn").count() == 1
    assert not records.filter(action__in=["approval_reminded", "approval_escalated"]).exists()


def test_a_reminder_due_withdraws_the_request_instead_of_reminding(ended, t0):
    assert schedule.send_reminders(now=later(t0, hours=8)) == 0
    _withdrawn_and_nobody_told(ended, NotificationKind.REMINDER)
    assert ApprovalRequest.objects.get(pk=ended.pk).reminder_count == 0


def test_a_timeout_due_withdraws_the_request_instead_of_escalating(ended, t0):
    report = schedule.apply_timeouts(now=later(t0, days=2))
    assert (report.withdrawn, report.escalated) == (1, 0)
    _withdrawn_and_nobody_told(ended, NotificationKind.ESCALATION)
    assert ApprovalRequest.objects.get(pk=ended.pk).escalation_level == 0


def test_a_request_its_run_still_waits_for_is_reminded(approvers, dora, t0):
    request = open_request(waiting_run("test-approval-escalate"), t0)
    assert schedule.send_reminders(now=later(t0, hours=8)) == 1
    request = ApprovalRequest.objects.get(pk=request.pk)
    assert request.status == RequestStatus.PENDING and request.reminder_count == 1
