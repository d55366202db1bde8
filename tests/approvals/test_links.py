"""Signed, expiring links: the signature covers the request id, its status and its payload
hash; the link view moves the token into the session; a GET never changes anything."""

import uuid

import pytest
from django.urls import reverse
from django.utils.http import int_to_base36

from approvals import decisions
from approvals.models import ApprovalRequest, Notification
from approvals.tokens import LinkCheck, approval_link_token
from approvals.views import SESSION_TOKENS
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db

MAX_AGE = 3 * 24 * 3600


def _check(request, token, now):
    return approval_link_token.check_token(request, token, now=now)


def _link(request, token):
    return reverse("approvals:link", kwargs={"pk": request.pk, "token": token})


def _state(request):
    """Everything a GET must leave alone."""
    request.refresh_from_db()
    run = Run.objects.get(pk=request.run_id)
    return (request.status, request.decision_id, request.settled_at, run.status,
            AuditRecord.objects.filter(run=run).count(), ApprovalRequest.objects.count(),
            Notification.objects.count())


def test_a_link_is_valid_for_its_request_until_its_maximum_age(pending, t0):
    token = approval_link_token.make_token(pending, now=t0)
    assert _check(pending, token, t0) is LinkCheck.VALID
    assert _check(pending, token, later(t0, seconds=MAX_AGE)) is LinkCheck.VALID
    assert _check(pending, token, later(t0, seconds=MAX_AGE + 1)) is LinkCheck.EXPIRED


def test_the_maximum_age_is_a_setting(pending, t0, settings):
    token = approval_link_token.make_token(pending, now=t0)
    settings.APPROVAL_LINK_MAX_AGE = 60
    assert _check(pending, token, later(t0, seconds=60)) is LinkCheck.VALID
    assert _check(pending, token, later(t0, seconds=61)) is LinkCheck.EXPIRED


def test_a_tampered_link_is_invalid(pending, t0):
    other = open_request(waiting_run(), t0)
    token = approval_link_token.make_token(pending, now=t0)
    ts, digest = token.split("-")
    flipped = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    assert _check(pending, f"{ts}-{flipped}", t0) is LinkCheck.INVALID
    # A later timestamp (to make a link live longer) breaks the signature.
    assert _check(pending, f"{int_to_base36(int(ts, 36) + 3600)}-{digest}", t0) \
        is LinkCheck.INVALID
    # Another request's link does not open this one.
    assert _check(pending, approval_link_token.make_token(other, now=t0), t0) \
        is LinkCheck.INVALID
    for garbage in ("", "abc", "a-b-c", "zz-", "-", "!!-00", None):
        assert _check(pending, garbage, t0) is LinkCheck.INVALID
    assert _check(None, token, t0) is LinkCheck.INVALID


def test_a_link_dies_once_its_request_is_decided_or_superseded(pending, ann, t0):
    token = approval_link_token.make_token(pending, now=t0)
    decisions.decide(pending.pk, user=ann, approved=True, decision_id=uuid.uuid4(), now=t0)
    pending.refresh_from_db()
    assert _check(pending, token, t0) is LinkCheck.USED
    # A link made for a request in another state (the payload hash is covered too) is not
    # mistaken for a used one.
    pending.snapshot_hash = "0" * 64
    assert _check(pending, token, t0) is LinkCheck.INVALID


def test_links_signed_with_a_retired_secret_key_still_open_during_rotation(pending, t0,
                                                                            settings):
    token = approval_link_token.make_token(pending, now=t0)
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "a-new-secret-key-" + "x" * 40
    assert _check(pending, token, t0) is LinkCheck.VALID
    settings.SECRET_KEY_FALLBACKS = []
    assert _check(pending, token, t0) is LinkCheck.INVALID


def test_following_the_link_moves_the_token_into_the_session_and_changes_nothing(pending, ann,
                                                                                  client):
    token = approval_link_token.make_token(pending)
    before = _state(pending)
    response = client.get(_link(pending, token))
    detail = reverse("approvals:detail", kwargs={"pk": pending.pk})
    assert response.status_code == 302 and response["Location"] == detail
    assert client.session[SESSION_TOKENS] == {str(pending.pk): token}
    # Not signed in: the token-less page asks for a login first, and comes back.
    response = client.get(detail)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=")
    client.force_login(ann)
    response = client.get(detail)
    assert response.status_code == 200
    assert token not in response.content.decode()
    assert b"Approve" in response.content and b"Reject" in response.content
    # Mail scanners and people may open it as often as they like: nothing changes.
    client.get(_link(pending, token))
    client.get(detail)
    assert _state(pending) == before
    assert before[0] == "pending" and before[3] == RunStatus.WAITING


def test_an_expired_link_gets_a_page_that_says_so(pending, client, t0):
    token = approval_link_token.make_token(pending, now=later(t0, seconds=-MAX_AGE - 5))
    before = _state(pending)
    response = client.get(_link(pending, token))
    assert response.status_code == 410
    assert b"This approval link has expired" in response.content
    assert SESSION_TOKENS not in client.session
    assert _state(pending) == before


def test_a_tampered_link_gets_a_page_that_says_so(pending, client, caplog):
    token = approval_link_token.make_token(pending)
    before = _state(pending)
    for bad in (token[:-2] + "00", "nonsense", "x-y"):
        response = client.get(_link(pending, bad))
        assert response.status_code == 400
        assert b"This approval link is not valid" in response.content
    response = client.get(reverse("approvals:link", kwargs={"pk": 999999, "token": token}))
    assert response.status_code == 400
    assert SESSION_TOKENS not in client.session
    assert "invalid signature" in caplog.text
    assert _state(pending) == before


def test_a_used_link_says_the_request_is_no_longer_pending(pending, ann, client):
    token = approval_link_token.make_token(pending)
    decisions.decide(pending.pk, user=ann, approved=False, comment="duplicate invoice",
                     decision_id=uuid.uuid4())
    response = client.get(_link(pending, token))
    assert response.status_code == 410
    assert b"no longer pending" in response.content and b"rejected" in response.content


def test_deciding_by_get_is_refused_and_changes_nothing(pending, ann, client):
    client.force_login(ann)
    before = _state(pending)
    url = reverse("approvals:decide", kwargs={"pk": pending.pk})
    assert client.get(url, {"decision": "approve", "decision_id": str(uuid.uuid4())}) \
        .status_code == 405
    assert client.head(url).status_code == 405
    assert _state(pending) == before


def test_deciding_needs_the_csrf_token(pending, ann):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(ann)
    before = _state(pending)
    response = client.post(reverse("approvals:decide", kwargs={"pk": pending.pk}),
                           {"decision": "approve", "decision_id": str(uuid.uuid4())})
    assert response.status_code == 403
    assert _state(pending) == before
