"""A request nobody decided in time says so wherever its approver meets it: the emailed
link's page says "This approval request timed out" and what its timeout policy did (reject;
cancel; escalate, then end after the deputies' time), never that it was decided, replaced
or withdrawn. A request a person decided is not said to have timed out. The link's page is
shown to whoever holds the link and names nobody; the request's page, for a person allowed
to see the request, names the deputies it escalated to."""

import html
import re
import uuid

import pytest
from django.urls import reverse

from approvals import decisions, schedule
from approvals.notifications import time_text
from approvals.tokens import approval_link_token
from tests.approvals.conftest import later, open_request, waiting_run

pytestmark = pytest.mark.django_db

TIMED_OUT = "This approval request timed out"
GENERIC = "it was decided, replaced because what is to be approved changed, or withdrawn"


def _open_link(client, request, token):
    response = client.get(reverse("approvals:link", kwargs={"pk": request.pk,
                                                            "token": token}))
    assert response.status_code == 410
    return html.unescape(response.content.decode())


def test_a_request_its_timeout_rejected_says_it_timed_out_and_was_rejected(pending, client,
                                                                            t0):
    # test-approval: rejected by its timeout policy after 3 days.
    token = approval_link_token.make_token(pending)
    assert schedule.sweep(now=later(t0, days=3)).timed_out == 1
    pending.refresh_from_db()
    assert pending.status == "rejected" and pending.decided_by is None

    text = _open_link(client, pending, token)
    assert TIMED_OUT in text and GENERIC not in text
    assert (f"Nobody decided it by {time_text(pending.due_at)}, so its timeout policy "
            "(reject) rejected it") in text
    assert "the run went to attention" in text
    assert "nothing was changed" in text


def test_a_request_its_timeout_cancelled_says_it_timed_out_and_expired(ann, client, t0):
    # test-approval-cancel: user:ann, cancel after 1 day.
    request = open_request(waiting_run("test-approval-cancel"), t0)
    token = approval_link_token.make_token(request)
    assert schedule.sweep(now=later(t0, days=1)).timed_out == 1
    request.refresh_from_db()
    assert request.status == "expired"

    text = _open_link(client, request, token)
    assert TIMED_OUT in text and GENERIC not in text
    assert "its timeout policy (cancel) ended it without a decision" in text
    assert "the run went to attention for an operator to decide what happens" in text


def test_a_request_that_timed_out_after_escalation_names_its_deputies_only_on_its_page(
        approvers, dora, client, t0):
    # test-approval-escalate: 2 days, then the deputies for 2 days more, then it expires.
    request = open_request(waiting_run("test-approval-escalate"), t0)
    token = approval_link_token.make_token(request)
    assert schedule.sweep(now=later(t0, days=2)).escalated == 1
    assert schedule.sweep(now=later(t0, days=4)).timed_out == 1
    request.refresh_from_db()
    assert request.status == "expired"

    # The link's page is shown to whoever holds the link, signed in or not: it says an
    # escalation happened and names no approver, deputy or group.
    text = _open_link(client, request, token)
    assert TIMED_OUT in text and GENERIC not in text
    assert (f"Nobody decided it by {time_text(later(t0, days=4))} (after escalation to its "
            "deputies), so its timeout policy (escalate) ended it without a decision") in text
    for name in ("finance-deputies", "approvers", "dora", "ann", "bob"):
        assert name not in text

    # The request's page asks who is signed in and whether they may see it: a deputy it
    # went to sees whom it went to.
    client.force_login(dora)
    page = html.unescape(client.get(reverse("approvals:detail",
                                            kwargs={"pk": request.pk})).content.decode())
    assert (f"Nobody decided it by {time_text(later(t0, days=4))} (after escalation to "
            "group:finance-deputies), so its timeout policy (escalate) ended it") in page


def test_the_request_page_says_it_timed_out_too(ann, client, t0):
    request = open_request(waiting_run("test-approval-cancel"), t0)
    token = approval_link_token.make_token(request)
    schedule.sweep(now=later(t0, days=1))
    # Opened from the email: the page says why the link is no longer live.
    _open_link(client, request, token)
    client.force_login(ann)
    page = html.unescape(client.get(reverse("approvals:detail",
                                            kwargs={"pk": request.pk})).content.decode())
    assert "this request timed out" in page
    assert "its timeout policy (cancel) ended it without a decision" in page


def test_a_request_a_person_rejected_is_not_said_to_have_timed_out(pending, ann, client):
    token = approval_link_token.make_token(pending)
    decisions.decide(pending.pk, user=ann, approved=False, comment="duplicate invoice",
                     decision_id=uuid.uuid4())
    text = _open_link(client, pending, token)
    assert "timed out" not in text
    assert re.search(r"no longer pending: it was\s+rejected at", text)
    # The link's page is shown to whoever holds the link: it names nobody.
    assert "ann" not in text
