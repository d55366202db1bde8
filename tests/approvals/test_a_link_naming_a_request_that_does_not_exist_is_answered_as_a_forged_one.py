"""An approval link naming a request id that does not exist gets the very answer a forged
link to an existing request gets: the same status and the same words, with no request id
in them, signed in or not. The page said "There is no approval request 999" for one and
"This approval link is not valid" for the other, so anyone could try ids and learn which
requests exist. Both count the same way towards the address's lockout
(approvals.throttle), and a valid link still opens its request."""

import re
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.test import Client
from django.urls import reverse

from approvals.models import ApprovalRequest
from approvals.throttle import LINK_USER
from approvals.tokens import approval_link_token
from approvals.views import SESSION_TOKENS
from audit.models import AuditRecord
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _limits(settings):
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)


def _state(request):
    """What a link must leave alone."""
    request.refresh_from_db()
    return (request.status, request.decision_id, Run.objects.get(pk=request.run_id).status,
            AuditRecord.objects.count(), ApprovalRequest.objects.count())


def _open(client, pk, token, address):
    return client.get(reverse("approvals:link", kwargs={"pk": pk, "token": token}),
                      REMOTE_ADDR=address)


def _said(response) -> str:
    """The page's own words: the <main> element (the rest of the page carries a CSRF token
    that differs on every response)."""
    return " ".join(re.search(r"<main\b.*</main>", response.content.decode(), re.S)
                    .group(0).split())


def _missing_pk() -> int:
    return ApprovalRequest.objects.order_by("-pk").values_list("pk", flat=True)[0] + 1000


@pytest.mark.parametrize("signed_in", [False, True], ids=["signed out", "signed in"])
def test_a_missing_request_and_a_forged_link_get_the_same_answer(pending, ann, signed_in):
    client = Client()
    if signed_in:
        # ann may view and decide the existing request: the page tells her no more.
        client.force_login(ann)
    before = _state(pending)
    live = approval_link_token.make_token(pending)
    forged = live[:-2] + ("00" if not live.endswith("00") else "11")
    missing_pk = _missing_pk()

    to_existing = _open(client, pending.pk, forged, "10.0.0.7")
    # A live token of one request, pasted under an id that has no request.
    to_missing = _open(client, missing_pk, live, "10.0.0.7")

    assert to_existing.status_code == to_missing.status_code == 400
    assert _said(to_existing) == _said(to_missing)
    said = _said(to_missing)
    assert "This approval link is not valid" in said
    assert "Nothing was changed" in said
    assert "no longer exists" in said  # an archived run's email link is not called forged
    for pk in (missing_pk, pending.pk):
        assert f"request {pk}" not in said and f"/approvals/{pk}/" not in said
    assert "There is no approval request" not in said
    assert SESSION_TOKENS not in client.session
    assert _state(pending) == before


def test_a_missing_request_and_a_forged_link_count_alike_towards_the_lockout(pending):
    client = Client()
    client.raise_request_exception = False
    before = _state(pending)
    forged = "forged-1"
    missing_pk = _missing_pk()
    live = approval_link_token.make_token(pending)

    # Missing ids first, then a forged link: the third is refused.
    assert _open(client, missing_pk, live, "10.0.0.8").status_code == 400
    assert _open(client, missing_pk + 1, live, "10.0.0.8").status_code == 400
    attempt = AccessAttempt.objects.get(ip_address="10.0.0.8")
    assert attempt.username == LINK_USER and attempt.failures_since_start == 2
    assert _open(client, pending.pk, forged, "10.0.0.8").status_code == 429

    # Forged links first, then a missing id: refused the same way.
    assert _open(client, pending.pk, forged, "10.0.0.9").status_code == 400
    assert _open(client, pending.pk, "forged-2", "10.0.0.9").status_code == 400
    attempt = AccessAttempt.objects.get(ip_address="10.0.0.9")
    assert attempt.username == LINK_USER and attempt.failures_since_start == 2
    locked = _open(client, missing_pk, live, "10.0.0.9")
    assert locked.status_code == 429
    assert "This approval link is not valid" not in locked.content.decode()
    assert _state(pending) == before


def test_a_valid_link_still_opens_its_request(pending, ann):
    client = Client()
    live = approval_link_token.make_token(pending)
    # From an address locked out by missing ids: a valid link is honoured all the same.
    for n in range(3):
        _open(client, _missing_pk() + n, live, "10.0.0.10")
    assert _open(client, _missing_pk(), live, "10.0.0.10").status_code == 429

    response = _open(client, pending.pk, live, "10.0.0.10")
    assert response.status_code == 302
    assert response["Location"] == reverse("approvals:detail", kwargs={"pk": pending.pk})
    assert client.session[SESSION_TOKENS] == {str(pending.pk): live}
    client.force_login(ann)
    page = client.get(response["Location"])
    assert page.status_code == 200
    assert "Approve" in page.content.decode()
