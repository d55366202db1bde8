"""What the email server answered a failed delivery is kept (on the notification, on its
request's problem, in the log) as a person may read it: through the redaction filter, so a
credential or a live approval link that the server or the email provider's API quotes back
is masked, and with what the database cannot store written out, so that one odd answer
neither stops the outbox nor the deliveries queued behind it."""

import re

import pytest
from django.core.mail.backends.base import BaseEmailBackend

from approvals import notifications
from approvals.models import ApprovalRequest, Notification
from tests.approvals.conftest import later

pytestmark = pytest.mark.django_db

API_KEY = "api_key=key-0123456789abcdef"


class QuotingBackend(BaseEmailBackend):
    """An email API that refuses the message and quotes its request back: the key it was
    called with, the message's text (with its link) and a NUL byte."""

    def send_messages(self, email_messages):
        (message,) = email_messages
        raise ConnectionError(f"POST https://mail.example/v3/send?{API_KEY} refused "
                              f"(422\x00): {message.body}")


@pytest.fixture
def quoting(settings):
    settings.EMAIL_BACKEND = f"{__name__}.QuotingBackend"
    settings.APPROVALS_NOTIFICATION_MAX_ATTEMPTS = 2


def _link_tokens(text):
    return re.findall(r"/approvals/\d+/link/([^/\s]+)/", text)


@pytest.mark.usefixtures("quoting")
def test_a_refusal_quoting_a_key_and_the_link_is_kept_masked_and_the_outbox_goes_on(
        pending, t0, caplog):
    report = notifications.publish_notifications(now=t0)

    assert report.retrying == 2  # both approvers' notifications, not the first alone
    for note in Notification.objects.filter(request=pending):
        assert note.status == "pending" and note.attempts == 1
        assert "ConnectionError" in note.last_error and "refused (422\\x00)" in note.last_error
        assert "key-0123456789abcdef" not in note.last_error
        assert "/approvals/" in note.last_error
        assert set(_link_tokens(note.last_error)) == {"[redacted]"}
    assert "key-0123456789abcdef" not in caplog.text
    assert set(_link_tokens(caplog.text)) <= {"[redacted]"}

    # Given up: the request's problem, shown on the run's page, says why, masked too.
    assert notifications.publish_notifications(now=later(t0, days=1)).failed == 2
    problem = ApprovalRequest.objects.get(pk=pending.pk).problem
    assert "notification to ann@example.com failed" in problem
    assert "key-0123456789abcdef" not in problem and "\x00" not in problem
    assert set(_link_tokens(problem)) == {"[redacted]"}
    assert "key-0123456789abcdef" not in caplog.text
    assert set(_link_tokens(caplog.text)) <= {"[redacted]"}
