"""An approver's page (the inbox, a request, its decide address) opened signed out by a link
with a query as long as Django redirects to leads to the sign-in page, and then to the page
without its query: written into the sign-in address's `next`, the link grew past
MAX_URL_REDIRECT_LENGTH, Django refused the redirect, and the approver was answered "Bad
request" with no way to sign in. A link that fits is carried back whole, as before. The
console's pages answer so too (approvals.sign_in, which both use)."""

import uuid
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.http import MAX_URL_REDIRECT_LENGTH

from approvals.models import ApprovalRequest
from audit.models import AuditRecord

pytestmark = pytest.mark.django_db

PAGES = ["approvals:inbox", "approvals:detail", "approvals:decide"]


def address(name: str, approval: ApprovalRequest) -> str:
    return reverse(name, kwargs={} if name == "approvals:inbox" else {"pk": approval.pk})


def long_link(path: str) -> str:
    """`path` with a query that makes the link as long as Django redirects to."""
    return f"{path}?after=" + "b" * (MAX_URL_REDIRECT_LENGTH - len(path) - len("?after="))


def sent_back_to(response) -> str:
    """Where the sign-in page `response` sends to sends back to, after signing in."""
    assert response.status_code == 302, response.status_code
    parts = urlsplit(response["Location"])
    assert parts.path == reverse("login")
    assert len(response["Location"]) <= MAX_URL_REDIRECT_LENGTH
    [then] = parse_qs(parts.query)["next"]
    return then


def written() -> tuple:
    return (list(ApprovalRequest.objects.values_list("pk", "status", "decided_by")),
            AuditRecord.objects.count())


@pytest.mark.parametrize("name", PAGES)
def test_a_long_link_opened_signed_out_leads_to_sign_in_then_to_its_page(pending, name):
    path = address(name, pending)
    link = long_link(path)
    assert len(link) == MAX_URL_REDIRECT_LENGTH
    before = written()
    assert sent_back_to(Client().get(link)) == path
    assert written() == before


@pytest.mark.parametrize("name", PAGES)
def test_a_link_that_fits_still_leads_back_with_its_query(pending, name):
    link = f"{address(name, pending)}?after=abc"
    assert sent_back_to(Client().get(link)) == link


def test_a_decision_posted_signed_out_to_a_long_link_is_sent_to_sign_in_and_records_nothing(
        pending):
    path = address("approvals:decide", pending)
    before = written()
    response = Client().post(long_link(path), {"decision": "approve", "comment": "",
                                               "decision_id": str(uuid.uuid4())})
    assert sent_back_to(response) == path
    assert written() == before
    assert ApprovalRequest.objects.get(pk=pending.pk).status == "pending"


def test_signed_in_the_page_the_sign_in_sends_back_to_is_shown(pending, ann):
    client = Client()
    then = sent_back_to(client.get(long_link(address("approvals:detail", pending))))
    client.force_login(ann)
    page = client.get(then)
    assert page.status_code == 200
    assert page.context["approval"].pk == pending.pk
