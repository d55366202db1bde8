"""A console link as long as the console hands out (a saved view's, which may be as long as
Django redirects to), opened by someone signed out, leads to the sign-in page, and then to
the page without its query where the query cannot be carried: written into the sign-in
address's `next`, the link grew past MAX_URL_REDIRECT_LENGTH, Django refused the redirect,
and the person was answered "Bad request" with no way to sign in. The same for a poll, an
action sent by htmx and a form sent from such a page."""

from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.http import MAX_URL_REDIRECT_LENGTH

from audit.models import AuditRecord
from console import run_list
from runs.models import Run, RunStatus

pytestmark = pytest.mark.django_db

HOST = "http://testserver"


@pytest.fixture
def long_list():
    """The runs list searched by a text as long as a saved view may keep."""
    runs = reverse("console:runs")
    query = "q=" + "b" * (MAX_URL_REDIRECT_LENGTH - len(runs) - len("?q="))
    assert run_list.fits_in_link(query)
    return f"{runs}?{query}"


def _next(sign_in: str) -> str:
    parts = urlsplit(sign_in)
    assert parts.path == reverse("login")
    assert len(sign_in) <= MAX_URL_REDIRECT_LENGTH
    [then] = parse_qs(parts.query)["next"]
    return then


def test_a_long_link_opened_signed_out_leads_to_sign_in_then_to_its_page(long_list):
    response = Client().get(long_list)
    assert response.status_code == 302
    assert _next(response.url) == reverse("console:runs")


def test_a_short_link_still_leads_back_with_its_query():
    response = Client().get(f"{reverse('console:runs')}?status=attention")
    assert response.status_code == 302
    assert _next(response.url) == f"{reverse('console:runs')}?status=attention"


def test_a_poll_of_a_long_page_sends_the_browser_to_sign_in(long_list, stuck_run):
    response = Client().get(f"{reverse('console:run', args=[stuck_run.pk])}?part=live",
                            HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=HOST + long_list)
    assert response.status_code == 200
    assert _next(response["HX-Redirect"]) == reverse("console:runs")


def test_an_action_from_a_long_page_is_refused_401_and_changes_nothing(long_list, stuck_run):
    records = AuditRecord.objects.count()
    address = reverse("console:action", args=[stuck_run.pk, "terminate"])
    form = {"seen": str(stuck_run.audit_seq), "reason": "incident"}
    by_htmx = Client().post(address, form, HTTP_HX_REQUEST="true",
                            HTTP_HX_CURRENT_URL=HOST + long_list)
    assert by_htmx.status_code == 401
    assert b"nothing was changed" in by_htmx.content.lower()
    plain = Client().post(address, form, HTTP_REFERER=HOST + long_list)
    assert plain.status_code == 302
    # A Referer that long is not trusted to be of this site (Django's
    # url_has_allowed_host_and_scheme): the console's first page, after signing in.
    assert _next(plain.url) == "/"
    assert AuditRecord.objects.count() == records
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
