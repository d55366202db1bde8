"""An approval's requests may be told once and never reminded: the approvals app gives a
request with no reminder interval no reminder (approvals.requests.next_reminder), and the
sweep reminds only a request with one. Declaring it so, remind_every=None, was refused
("remind_every must be a positive timedelta, not None"), so an author who wanted no
reminders had to pick an interval past the timeout. Now None is declared, for an approval
step and a tool approval alike, and such a request is told once when it opens and never
reminded, however long it waits before its timeout."""

from datetime import timedelta

import pytest

from approvals import schedule
from approvals.models import ApprovalRequest, Notification, NotificationKind
from runs.definitions import definition
from runs.definitions.definition import Workflow, tool_approval
from tests.approvals.conftest import later, open_request, waiting_run
from tests.workflows import FAST, OrderIn

WORKFLOW = "test-approval-never-reminded"


def _snapshot(ctx):
    return {"order": ctx.input.order}


@pytest.fixture
def never_reminded():
    workflow = Workflow(WORKFLOW, version=1, input=OrderIn)
    workflow.read("prepare", retry=FAST)(lambda ctx: {"order": ctx.input.order})
    workflow.approval("approve", approvers=("group:approvers",), remind_every=None,
                      timeout=timedelta(days=2), on_timeout="reject")(_snapshot)
    workflow.write("pay", retry=FAST, honours_key=True)(lambda ctx: {"ref": "pay-1"})
    yield workflow
    definition.registry.unregister(workflow)


def test_a_step_and_a_tool_approval_are_declared_with_no_reminder(never_reminded):
    assert never_reminded.step("approve").approval.remind_every is None
    assert tool_approval(approvers=("group:approvers",), remind_every=None).remind_every is None


@pytest.mark.django_db
def test_its_request_is_told_once_and_never_reminded(never_reminded, approvers, t0):
    request = open_request(waiting_run(WORKFLOW), t0)
    assert request.next_reminder_at is None
    for hours in (8, 24, 47):
        assert schedule.send_reminders(now=later(t0, hours=hours)) == 0
    request = ApprovalRequest.objects.get(pk=request.pk)
    assert (request.status, request.reminder_count) == ("pending", 0)
    assert Notification.objects.filter(request=request, kind=NotificationKind.REMINDER).count() == 0
    assert Notification.objects.filter(request=request, kind=NotificationKind.REQUEST).count() == 2
