"""The decide address only takes a POST. A person who reloads it or follows it gets a 405
page (Allow: POST) saying that decisions are made from the request page, with a link
there; it is signed-in and permission-checked as the request page is, and changes nothing."""

import html
import uuid

import pytest
from django.urls import reverse

from approvals.models import ApprovalRequest
from audit.models import AuditRecord

pytestmark = pytest.mark.django_db


def _url(request):
    return reverse("approvals:decide", kwargs={"pk": request.pk})


def _written():
    return (list(ApprovalRequest.objects.values_list("pk", "status", "decision_id")),
            AuditRecord.objects.count())


def test_a_get_of_the_decide_address_says_where_decisions_are_made(pending, ann, client):
    client.force_login(ann)
    before = _written()
    response = client.get(_url(pending), {"decision": "approve",
                                          "decision_id": str(uuid.uuid4())})
    assert response.status_code == 405
    assert response["Allow"] == "POST"
    text = html.unescape(response.content.decode())
    assert "Decisions are made from the request page" in text
    detail = reverse("approvals:detail", kwargs={"pk": pending.pk})
    assert f'href="{detail}"' in text
    assert "nothing was recorded" in text.lower()
    assert _written() == before


def test_a_head_of_the_decide_address_is_refused_the_same_way(pending, ann, client):
    client.force_login(ann)
    before = _written()
    response = client.head(_url(pending))
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert _written() == before


def test_a_person_who_may_not_see_the_request_gets_the_not_found_page(pending, carol,
                                                                       client):
    client.force_login(carol)
    before = _written()
    response = client.get(_url(pending))
    # As a request that does not exist: told apart, the answer would say which ids exist.
    assert response.status_code == 404
    assert [t.name for t in response.templates][0] == "404.html"
    assert "Decisions are made from the request page" not in response.content.decode()
    assert _written() == before


def test_an_anonymous_visitor_is_sent_to_sign_in(pending, client):
    response = client.get(_url(pending))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_an_unknown_request_is_not_found(ann, client):
    client.force_login(ann)
    assert client.get(reverse("approvals:decide", kwargs={"pk": 999999})).status_code == 404


def test_a_post_still_decides(pending, ann, client):
    client.force_login(ann)
    response = client.post(_url(pending), {"decision": "approve", "comment": "",
                                           "decision_id": str(uuid.uuid4())})
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.status == "approved" and pending.decided_by == ann
