"""The outbox publisher: Django's email backend gets each notification with a fresh signed
link; failures are retried with backoff; the message id is stored."""

from urllib.parse import urlparse

import pytest
from django.contrib.auth.models import User
from django.urls import resolve

from approvals import decisions, notifications
from approvals.models import Notification
from approvals.tokens import LinkCheck, approval_link_token
from runs.models import Run, RunStatus
from tests.api.test_metrics import scrape, value
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db


def _link_in(body):
    return next(line for line in body.splitlines() if line.startswith("http://testserver/"))


def test_the_publisher_sends_the_link_and_stores_the_message_id(pending, mailoutbox, t0):
    report = notifications.publish_notifications(now=t0)
    assert (report.sent, report.retrying, report.failed) == (2, 0, 0)
    assert sorted(m.to[0] for m in mailoutbox) == ["ann@example.com", "bob@example.com"]
    message = next(m for m in mailoutbox if m.to == ["ann@example.com"])
    run = Run.objects.get(pk=pending.run_id)
    assert message.subject == f"approval needed: test-approval {run.business_key}: approve"
    assert "Order: " + run.business_key in message.body
    assert f"Payload sha256: {pending.snapshot_hash}" in message.body

    note = Notification.objects.get(recipient="ann@example.com")
    assert note.status == "sent" and note.sent_at == t0 and note.attempts == 1
    assert note.provider_message_id == note.message_id == message.extra_headers["Message-ID"]
    assert message.message()["Message-ID"] == note.provider_message_id

    link = urlparse(_link_in(message.body))
    match = resolve(link.path)
    assert match.view_name == "approvals:link" and match.kwargs["pk"] == pending.pk
    assert approval_link_token.check_token(pending, match.kwargs["token"], now=t0) \
        is LinkCheck.VALID
    # Sent once: a second pass sends nothing.
    assert notifications.publish_notifications(now=later(t0, hours=1)).sent == 0
    assert len(mailoutbox) == 2


def test_the_emailed_link_opens_the_request_for_the_approver(pending, ann, client, mailoutbox):
    notifications.publish_notifications()
    message = next(m for m in mailoutbox if m.to == ["ann@example.com"])
    client.force_login(ann)
    response = client.get(urlparse(_link_in(message.body)).path, follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[-1][0] == f"/approvals/{pending.pk}/"
    assert response.context["approval"] == pending and response.context["can_decide"]


def test_a_failed_delivery_is_retried_with_backoff_then_given_up(pending, settings, mailoutbox,
                                                                 t0, caplog):
    settings.EMAIL_BACKEND = "tests.approvals.backends.RefusingBackend"
    settings.APPROVALS_NOTIFICATION_MAX_ATTEMPTS = 3
    report = notifications.publish_notifications(now=t0)
    assert (report.sent, report.retrying) == (0, 2)
    note = Notification.objects.get(recipient="ann@example.com")
    assert note.status == "pending" and note.attempts == 1
    assert note.next_attempt_at == later(t0, seconds=30)
    assert "SMTPServerDisconnected" in note.last_error and note.provider_message_id == ""
    assert "attempt 1 failed" in caplog.text

    assert notifications.publish_notifications(now=later(t0, seconds=29)).retrying == 0
    assert notifications.publish_notifications(now=later(t0, seconds=30)).retrying == 2
    note.refresh_from_db()
    assert note.attempts == 2 and note.next_attempt_at == later(t0, seconds=90)
    assert notifications.publish_notifications(now=later(t0, seconds=90)).failed == 2
    note.refresh_from_db()
    assert note.status == "failed" and note.attempts == 3

    # Once failed, it stays failed: the server coming back sends nothing by itself.
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert notifications.publish_notifications(now=later(t0, days=1)).sent == 0
    assert mailoutbox == []


def test_a_failure_then_a_success_sends_once_with_the_same_message_id(pending, settings,
                                                                      mailoutbox, t0):
    settings.EMAIL_BACKEND = "tests.approvals.backends.RefusingBackend"
    notifications.publish_notifications(now=t0)
    first_id = Notification.objects.get(recipient="ann@example.com").message_id
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert notifications.publish_notifications(now=later(t0, seconds=30)).sent == 2
    note = Notification.objects.get(recipient="ann@example.com")
    assert note.status == "sent" and note.attempts == 2 and note.last_error == ""
    assert note.provider_message_id == first_id
    assert len(mailoutbox) == 2


def test_notifications_of_a_decided_request_are_not_sent(pending, ann, mailoutbox):
    import uuid

    decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    report = notifications.publish_notifications()
    assert (report.sent, report.skipped) == (0, 2) and mailoutbox == []
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED


def test_the_email_shows_the_snapshot_for_a_person(approvers, mailoutbox):
    request = open_request(waiting_run("test-approval-escalate", amount=1234))
    notifications.publish_notifications()
    body = mailoutbox[0].body
    assert "  Amount: 1234 EUR" in body
    assert "  Reasons:\n    - known vendor\n    - <b>bold</b> & co" in body  # plain text
    assert request.snapshot["currency"] == "EUR"


INJECTED_KEY = "tenant-1:inv-1\r\nBcc: evil@example.com"


def test_a_business_key_with_a_line_break_never_reaches_a_mail_header(approvers, mailoutbox,
                                                                      t0):
    # A run from before start_run refused control characters in business keys.
    run = waiting_run()
    Run.objects.filter(pk=run.pk).update(business_key=INJECTED_KEY)
    open_request(run, t0)
    report = notifications.publish_notifications(now=t0)
    assert (report.sent, report.failed) == (2, 0)
    for message in mailoutbox:
        assert message.subject == \
            "approval needed: test-approval tenant-1:inv-1 Bcc: evil@example.com: approve"
        built = message.message()
        assert built["Bcc"] is None and "evil@example.com" not in message.recipients()
        assert "\n" not in built["Subject"] and "\r" not in built["Subject"]


def test_a_queued_subject_with_a_line_break_is_sent_sanitised(pending, mailoutbox, t0):
    Notification.objects.filter(request=pending).update(subject="approve\r\nBcc: x@example.com")
    assert notifications.publish_notifications(now=t0).sent == 2
    assert {m.subject for m in mailoutbox} == {"approve Bcc: x@example.com"}


def test_a_notification_that_cannot_be_built_fails_at_once_with_its_reason_everywhere(
        pending, client, mailoutbox, t0):
    # The address is the person's as it is when sent (an account saved around the form's
    # checks).
    User.objects.filter(username="ann").update(email="ann@example.com\r\nBcc: evil@example.com")
    report = notifications.publish_notifications(now=t0)
    assert (report.sent, report.retrying, report.failed) == (1, 0, 1)
    note = Notification.objects.get(recipient__startswith="ann@")
    assert note.status == "failed" and note.attempts == 1
    assert note.last_error.startswith("cannot be built: BadHeaderError")
    pending.refresh_from_db()
    assert "failed: cannot be built: BadHeaderError" in pending.problem
    # Not retried: a later pass sends nothing and leaves it failed.
    assert notifications.publish_notifications(now=later(t0, days=1)).failed == 0
    assert [m.to for m in mailoutbox] == [["bob@example.com"]]

    client.force_login(User.objects.create_superuser("root", password="pw"))
    page = client.get(f"/runs/{pending.run_id}/").content.decode()
    assert "cannot be built: BadHeaderError" in page
    assert value(scrape(client), "durable_outbox_failed") == 1


def test_a_notification_given_up_after_its_retries_says_why_on_its_request(
        pending, settings, t0):
    settings.EMAIL_BACKEND = "tests.approvals.backends.RefusingBackend"
    settings.APPROVALS_NOTIFICATION_MAX_ATTEMPTS = 2
    notifications.publish_notifications(now=t0)
    assert notifications.publish_notifications(now=later(t0, seconds=30)).failed == 2
    note = Notification.objects.get(recipient="ann@example.com")
    assert note.status == "failed"
    assert note.last_error == ("not sent after 2 attempts: SMTPServerDisconnected: "
                               "connection unexpectedly closed")
    pending.refresh_from_db()
    assert f"notification to ann@example.com failed: {note.last_error}" in pending.problem
    assert "notification to bob@example.com failed" in pending.problem
