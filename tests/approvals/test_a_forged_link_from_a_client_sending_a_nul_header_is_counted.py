"""A forged approval link is counted as a failed login (approvals.throttle), and the
failed-login log keeps the client's User-Agent and Accept headers, which any client sets.
One holding a NUL, which PostgreSQL does not store, still gets the page saying the link is
not valid, and is still counted: otherwise it would be a way to try links unthrottled."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.urls import reverse

from approvals.models import ApprovalRequest, Notification
from approvals.throttle import LINK_USER
from audit.models import AuditRecord
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


def state(request):
    """What a link must leave alone."""
    request.refresh_from_db()
    return (request.status, request.decision_id, Run.objects.get(pk=request.run_id).status,
            AuditRecord.objects.count(), ApprovalRequest.objects.count(),
            Notification.objects.count())


def _open(client, request, token, **headers):
    return client.get(reverse("approvals:link", kwargs={"pk": request.pk, "token": token}),
                      REMOTE_ADDR="10.0.0.9", **headers)


@pytest.mark.parametrize("header", ["HTTP_USER_AGENT", "HTTP_ACCEPT"])
def test_a_forged_link_sent_with_a_nul_in_a_header_is_refused_counted_and_locked_out(
        client, pending, header):
    before = state(pending)
    client.raise_request_exception = False
    for n in (1, 2):
        response = _open(client, pending, f"forged-{n}", **{header: "probe\x00/1.0"})
        assert response.status_code == 400
        assert "This approval link is not valid" in response.content.decode()
    attempt = AccessAttempt.objects.get(ip_address="10.0.0.9")
    assert attempt.username == LINK_USER and attempt.failures_since_start == 2
    assert "\x00" not in attempt.user_agent + attempt.http_accept
    locked = _open(client, pending, "forged-3", **{header: "probe\x00/1.0"})
    assert locked.status_code == 429
    assert state(pending) == before
