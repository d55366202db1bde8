"""The outbox publisher: Django's email backend gets each notification with a fresh signed
link; failures are retried with backoff; the message id is stored."""

from urllib.parse import urlparse

import pytest
from django.urls import resolve

from approvals import services
from approvals.models import Notification
from approvals.tokens import LinkCheck, approval_link_token
from runs.models import Run, RunStatus
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db


def _link_in(body):
    return next(line for line in body.splitlines() if line.startswith("http://testserver/"))


def test_the_publisher_sends_the_link_and_stores_the_message_id(pending, mailoutbox, t0):
    report = services.publish_notifications(now=t0)
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
    assert services.publish_notifications(now=later(t0, hours=1)).sent == 0
    assert len(mailoutbox) == 2


def test_the_emailed_link_opens_the_request_for_the_approver(pending, ann, client, mailoutbox):
    services.publish_notifications()
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
    report = services.publish_notifications(now=t0)
    assert (report.sent, report.retrying) == (0, 2)
    note = Notification.objects.get(recipient="ann@example.com")
    assert note.status == "pending" and note.attempts == 1
    assert note.next_attempt_at == later(t0, seconds=30)
    assert "SMTPServerDisconnected" in note.last_error and note.provider_message_id == ""
    assert "attempt 1 failed" in caplog.text

    assert services.publish_notifications(now=later(t0, seconds=29)).retrying == 0
    assert services.publish_notifications(now=later(t0, seconds=30)).retrying == 2
    note.refresh_from_db()
    assert note.attempts == 2 and note.next_attempt_at == later(t0, seconds=90)
    assert services.publish_notifications(now=later(t0, seconds=90)).failed == 2
    note.refresh_from_db()
    assert note.status == "failed" and note.attempts == 3

    # Once failed, it stays failed: the server coming back sends nothing by itself.
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert services.publish_notifications(now=later(t0, days=1)).sent == 0
    assert mailoutbox == []


def test_a_failure_then_a_success_sends_once_with_the_same_message_id(pending, settings,
                                                                      mailoutbox, t0):
    settings.EMAIL_BACKEND = "tests.approvals.backends.RefusingBackend"
    services.publish_notifications(now=t0)
    first_id = Notification.objects.get(recipient="ann@example.com").message_id
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    assert services.publish_notifications(now=later(t0, seconds=30)).sent == 2
    note = Notification.objects.get(recipient="ann@example.com")
    assert note.status == "sent" and note.attempts == 2 and note.last_error == ""
    assert note.provider_message_id == first_id
    assert len(mailoutbox) == 2


def test_notifications_of_a_decided_request_are_not_sent(pending, ann, mailoutbox):
    import uuid

    services.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    report = services.publish_notifications()
    assert (report.sent, report.skipped) == (0, 2) and mailoutbox == []
    assert Run.objects.get(pk=pending.run_id).status == RunStatus.QUEUED


def test_the_email_shows_the_snapshot_for_a_person(approvers, mailoutbox):
    request = open_request(waiting_run("test-approval-escalate", amount=1234))
    services.publish_notifications()
    body = mailoutbox[0].body
    assert "  Amount: 1234 EUR" in body
    assert "  Reasons:\n    - known vendor\n    - <b>bold</b> & co" in body  # plain text
    assert request.snapshot["currency"] == "EUR"
