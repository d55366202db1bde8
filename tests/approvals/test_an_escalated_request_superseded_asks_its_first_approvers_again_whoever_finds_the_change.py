"""A request escalated to its deputies whose payload then changes is superseded by whoever
finds the change first: a reminder, its second timeout, or a person's decision (a deputy's).
The new request is a new question about a new payload: it starts as any request does, with
its first approvers, its own timeout and its escalation still to come, the same whichever of
the three found it (approvals.payload_check.payload_outcome, requests.supersede)."""

import uuid

import pytest

from approvals import notifications, schedule
from approvals.decisions import decide
from approvals.models import ApprovalRequest, Notification, NotificationKind, RequestStatus
from runs.models import Step
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db


def _by_reminder(request, at, dora):
    assert schedule.send_reminders(now=at) == 1


def _by_timeout(request, at, dora):
    assert schedule.apply_timeouts(now=at).superseded == 1


def _by_decision(request, at, dora):
    said = decide(request.pk, user=dora, approved=True, decision_id=uuid.uuid4(), now=at)
    assert said.outcome == "superseded", said.message


# Who finds the change, and when: (days, hours) after the escalation.
FINDERS = {"reminder": (_by_reminder, (0, 8)), "timeout": (_by_timeout, (2, 1)),
           "decision": (_by_decision, (0, 1))}


@pytest.mark.parametrize("finder", list(FINDERS))
def test_the_new_request_asks_the_first_approvers_and_may_escalate_again(
        finder, approvers, dora, t0, mailoutbox):
    find, (days, hours) = FINDERS[finder]
    request = open_request(waiting_run("test-approval-escalate"), t0)
    escalated_at = later(request.due_at, seconds=1)
    assert schedule.apply_timeouts(now=escalated_at).escalated == 1
    request.refresh_from_db()
    assert request.escalation_level == 1
    notifications.publish_notifications(now=escalated_at)
    mailoutbox.clear()
    Step.objects.filter(run=request.run, name="prepare").update(result={"order": "corrected"})
    at = later(escalated_at, days=days, hours=hours)

    find(request, at, dora)

    request.refresh_from_db()
    assert request.status == RequestStatus.SUPERSEDED and request.escalation_level == 1
    new = ApprovalRequest.objects.get(pk=request.superseded_by_id)
    assert new.status == RequestStatus.PENDING and new.escalation_level == 0
    assert (new.approvers, new.escalate_to) == (request.approvers, request.escalate_to)
    assert (new.requested_at, new.due_at) == (at, at + request.timeout)
    assert set(Notification.objects.filter(request=new).values_list("kind", flat=True)) == \
        {NotificationKind.REQUEST}
    notifications.publish_notifications(now=at)
    assert sorted(m.to[0] for m in mailoutbox) == ["ann@example.com", "bob@example.com"]
    # Nobody decided it in its own time: its deputies are asked, as the first request's were.
    assert schedule.apply_timeouts(now=later(new.due_at, seconds=1)).escalated == 1
