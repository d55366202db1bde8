"""A decide form the page cannot take (its decision tampered with or missing, its hidden
decision id missing or garbled) is answered with a 400 page that says in words what was
wrong and that nothing was recorded, whether or not the request can still be decided; and
nothing is written."""

import html
import re
import uuid

import pytest
from django.urls import reverse

from approvals import decisions
from approvals.models import ApprovalRequest
from audit.models import AuditRecord

pytestmark = pytest.mark.django_db

DECISION_WRONG = ("The decision was missing or not one of approve / reject; nothing was "
                  "recorded.")
ID_WRONG = ("The form was incomplete (its decision id is missing or altered); nothing was "
            "recorded.")


def _written():
    """What a decision would write: a decision on some request, a record on some run."""
    return (ApprovalRequest.objects.exclude(decided_at=None).count(),
            ApprovalRequest.objects.exclude(decision_id=None).count(),
            AuditRecord.objects.count())


def _post(client, request, data):
    return client.post(reverse("approvals:decide", kwargs={"pk": request.pk}), data)


def _text(response) -> str:
    return html.unescape(response.content.decode())


@pytest.mark.parametrize("data, said", [
    ({"decision": "approve-all", "decision_id": str(uuid.uuid4())}, DECISION_WRONG),
    ({"decision": "", "decision_id": str(uuid.uuid4())}, DECISION_WRONG),
    ({"decision_id": str(uuid.uuid4())}, DECISION_WRONG),
    ({"decision": "approve"}, ID_WRONG),
    ({"decision": "approve", "decision_id": ""}, ID_WRONG),
    ({"decision": "approve", "decision_id": "not-a-uuid"}, ID_WRONG),
])
def test_a_tampered_form_on_a_pending_request_gets_a_400_saying_what_was_wrong(
        pending, ann, client, data, said):
    client.force_login(ann)
    before = _written()
    response = _post(client, pending, {"comment": "", **data})
    assert response.status_code == 400
    assert said in _text(response)
    assert _written() == before
    pending.refresh_from_db()
    assert pending.status == "pending" and pending.decision_id is None


def test_both_wrong_at_once_are_both_said(pending, ann, client):
    client.force_login(ann)
    before = _written()
    response = _post(client, pending, {"decision": "maybe", "decision_id": "x"})
    assert response.status_code == 400
    assert DECISION_WRONG in _text(response) and ID_WRONG in _text(response)
    assert _written() == before


def test_a_tampered_value_is_not_echoed_into_the_page(pending, ann, client):
    client.force_login(ann)
    response = _post(client, pending, {"decision": "<script>alert(1)</script>",
                                       "decision_id": "<img src=x onerror=alert(1)>"})
    assert response.status_code == 400
    content = response.content.decode()
    assert "<script>alert(1)" not in content and "<img src=x" not in content


def test_the_form_shown_again_after_a_garbled_id_carries_a_new_one_that_decides(
        pending, ann, client):
    """The hidden id the person cannot see or fix is replaced: deciding again from the 400
    page records the decision, once."""
    client.force_login(ann)
    response = _post(client, pending, {"decision": "approve", "decision_id": "garbled"})
    assert response.status_code == 400
    hidden = re.search(r'name="decision_id" value="([^"]*)"', response.content.decode())
    assert hidden is not None
    fresh = uuid.UUID(hidden.group(1))

    again = _post(client, pending, {"decision": "approve", "comment": "",
                                    "decision_id": str(fresh)})
    assert again.status_code == 302
    pending.refresh_from_db()
    assert pending.status == "approved" and pending.decision_id == fresh


def test_a_tampered_form_on_a_request_decided_meanwhile_still_says_what_was_wrong(
        pending, ann, bob, client):
    """The page offers no form for a request that is no longer decidable; the refusal of
    the form that was sent is said all the same."""
    decisions.decide(pending.pk, user=bob, approved=True, decision_id=uuid.uuid4())
    client.force_login(ann)
    before = _written()
    response = _post(client, pending, {"decision": "approve"})
    assert response.status_code == 400
    text = _text(response)
    assert ID_WRONG in text
    assert 'name="decision"' not in text  # no form: it cannot be decided any more
    assert _written() == before
    pending.refresh_from_db()
    assert pending.decided_by == bob


def test_a_rejection_without_a_comment_on_a_closed_request_says_the_comment_is_missing(
        pending, ann, bob, client):
    decisions.decide(pending.pk, user=bob, approved=True, decision_id=uuid.uuid4())
    client.force_login(ann)
    before = _written()
    response = _post(client, pending, {"decision": "reject", "comment": "",
                                       "decision_id": str(uuid.uuid4())})
    assert response.status_code == 400
    assert "The comment is missing: a rejection needs one." in _text(response)
    assert _written() == before
