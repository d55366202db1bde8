"""A four-eyes request whose requester's account is deactivated just after it opened is no
longer awaited (approvals.withdrawal.no_longer_awaited). Its approvers were still mailed:
the sweep's pass between two full looks withdrew only requests whose timeout or reminder was
due, then delivered the mail, payload and deciding link, of a request nobody could apply;
the full look withdrew it up to a minute later. The pass now withdraws first the requests it
is about to mail, and their mail is skipped."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import four_eyes
from approvals.models import ApprovalRequest, Notification, RequestStatus
from approvals.schedule import sweep
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def person(name):
    user = User.objects.create_user(name, email=f"{name}@example.com", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


def test_a_request_opened_in_a_name_deactivated_since_mails_nobody(script, mailoutbox):
    ensure_roles(Group, Permission)
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    run = place(run, status=RunStatus.ATTENTION)
    olga, omar = person("olga"), person("omar")
    first = sweep()  # the full look of the minute: the next pass compares only what is due
    assert not first.locked_out
    request, _ = four_eyes.request_operator_action(run, action="terminate",
                                                   requested_by=olga, reason="duplicate")
    assert Notification.objects.filter(request=request, status="pending").exists()
    olga.is_active = False
    olga.save(update_fields=["is_active"])

    report = sweep()

    assert report.withdrawn == 1 and report.sent == 0
    assert mailoutbox == []
    request = ApprovalRequest.objects.get(pk=request.pk)
    assert request.status == RequestStatus.WITHDRAWN and request.decided_by_id is None
    assert "no longer active" in request.comment, request.comment
    assert not Notification.objects.filter(request=request, status="sent").exists()
    assert set(Notification.objects.filter(request=request).values_list("status", flat=True)) \
        == {"skipped"}
    assert AuditRecord.objects.filter(run=run, action="approval_withdrawn").count() == 1
    assert not AuditRecord.objects.filter(run=run, action="terminated").exists()
    assert omar.is_active  # the approver was not the one taken away
