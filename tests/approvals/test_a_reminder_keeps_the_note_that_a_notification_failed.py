"""A request's "problem" tells a person that an approver was never told (a notification
given up). Reminders and escalation look the approvers up again and say what stands in their
way now, but the note of a failed notification stands: it is how the runbook finds out."""

import pytest

from approvals import notifications, schedule
from approvals.models import ApprovalRequest
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db

FAILED_TO = ("notification to ann@example.com failed", "notification to bob@example.com failed")


@pytest.fixture
def failed_request(approvers, dora, settings, t0):
    """test-approval-escalate (reminders every 8 hours, deputies after 2 days), whose two
    notifications were given up at their first attempt."""
    request = open_request(waiting_run("test-approval-escalate"), t0)
    settings.EMAIL_BACKEND = "tests.approvals.backends.RefusingBackend"
    settings.APPROVALS_NOTIFICATION_MAX_ATTEMPTS = 1
    assert notifications.publish_notifications(now=t0).failed == 2
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    return request


def _problem(request) -> str:
    return ApprovalRequest.objects.get(pk=request.pk).problem


def test_reminders_keep_the_note_that_a_notification_failed(failed_request, t0):
    assert schedule.send_reminders(now=later(t0, hours=8)) == 1
    assert schedule.send_reminders(now=later(t0, hours=16)) == 1
    problem = _problem(failed_request)
    assert all(problem.count(note) == 1 for note in FAILED_TO), problem


def test_escalation_keeps_the_note_that_a_notification_failed(failed_request, t0):
    assert schedule.apply_timeouts(now=later(t0, days=2)).escalated == 1
    problem = _problem(failed_request)
    assert all(problem.count(note) == 1 for note in FAILED_TO), problem


def test_a_reminder_says_what_stands_in_the_way_now_beside_the_failed_notification(
        failed_request, ann, t0):
    ann.email = ""
    ann.save(update_fields=["email"])
    schedule.send_reminders(now=later(t0, hours=8))
    assert _problem(failed_request).startswith("ann has no email address; ")
    ann.email = "ann@example.com"
    ann.save(update_fields=["email"])
    schedule.send_reminders(now=later(t0, hours=16))
    problem = _problem(failed_request)
    assert "no email address" not in problem and all(note in problem for note in FAILED_TO)
