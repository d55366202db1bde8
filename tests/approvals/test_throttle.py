"""Approval links are throttled like logins: invalid links from one address count as failed
logins, and at AXES_FAILURE_LIMIT that address may open no invalid link until the cool-off
has passed; a valid link is always honoured (tests/security/test_link_throttle.py)."""

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.urls import reverse
from django.utils import timezone

from approvals.throttle import LINK_USER
from approvals.tokens import approval_link_token

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


def _open(client, request, token, address="10.0.0.1"):
    return client.get(reverse("approvals:link", kwargs={"pk": request.pk, "token": token}),
                      REMOTE_ADDR=address)


def test_invalid_links_lock_the_address_out_of_invalid_links(client, pending):
    assert _open(client, pending, "forged-1").status_code == 400
    assert _open(client, pending, "forged-2").status_code == 400
    locked = _open(client, pending, "forged-3")
    assert locked.status_code == 429 and "Too many failed attempts" in locked.content.decode()
    assert _open(client, pending, "forged-4").status_code == 429
    assert AccessAttempt.objects.get(ip_address="10.0.0.1").username == LINK_USER

    # Another address is not affected; after the cool-off this one is heard again.
    assert _open(client, pending, "forged-5", address="10.0.0.2").status_code == 400
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _open(client, pending, "forged-6").status_code == 400


def test_expired_or_used_links_are_not_counted_as_failures(client, pending, t0):
    old = approval_link_token.make_token(pending, now=t0 - timedelta(days=30))
    for _ in range(4):
        assert _open(client, pending, old).status_code == 410
    assert not AccessAttempt.objects.exists()


def test_link_failures_never_lock_out_a_persons_login(client, pending, ann):
    for n in range(3):
        _open(client, pending, f"forged-{n}")
    response = client.post("/accounts/login/", {"username": "ann", "password": "pw"},
                           REMOTE_ADDR="10.0.0.1")
    assert response.status_code == 302


def test_a_locked_out_address_still_gets_the_page_of_its_used_or_expired_link(client,
                                                                              pending, t0):
    # Both carry our signature: nobody's guess, and their approver is told which it is.
    for n in range(3):
        _open(client, pending, f"forged-{n}")
    assert _open(client, pending, "forged-9").status_code == 429
    old = approval_link_token.make_token(pending, now=t0 - timedelta(days=30))
    expired = _open(client, pending, old)
    assert expired.status_code == 410 and "expired" in expired.content.decode()


def test_a_link_with_a_nul_is_refused_without_an_error_or_a_count(client, pending):
    for text in ("forged\x00-1", "\x00"):
        response = _open(client, pending, text)
        assert response.status_code == 400
        assert "not valid" in response.content.decode()
    assert not AccessAttempt.objects.exists()
