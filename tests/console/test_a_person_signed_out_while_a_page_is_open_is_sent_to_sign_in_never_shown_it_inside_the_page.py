"""A person whose session ended while a console page was open (it expired, or they signed
out in another tab): the parts htmx polls send the browser to sign in and back to the page
it was on, and an action sent from a dialog is refused with a 401 saying nothing was
changed. A redirect to the sign-in page, followed inside htmx's request, swapped a whole
sign-in page into the part, and an action vanished unsaid. A form sent without htmx leads
through the sign-in page, which says nothing was changed, back to the page it was sent
from, not to its POST-only address."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from runs.reads.selectors import RunFilters

pytestmark = pytest.mark.django_db

HOST = "http://testserver"


def _htmx(page: str) -> dict:
    return {"HTTP_HX_REQUEST": "true", "HTTP_HX_CURRENT_URL": f"{HOST}{page}"}


def _polls(run, job) -> list[tuple[str, str]]:
    """(the part htmx asks for, the page it sits on)."""
    runs, detail = reverse("console:runs"), reverse("console:run", args=[run.pk])
    attention = reverse("console:attention")
    return [
        (f"{runs}?rows={run.pk}", f"{runs}?status=attention"),
        (f"{runs}?new_since=2026-01-01T00:00:00%2B00:00&shown={run.pk}", runs),
        (f"{attention}?new_since=2026-01-01T00:00:00%2B00:00", attention),
        (f"{detail}?part=live", detail),
        (f"{detail}?part=timeline&before=3", detail),
        (reverse("console:bulk_job", args=[job.pk]),
         reverse("console:bulk_job", args=[job.pk])),
    ]


@pytest.fixture
def job(stuck_run):
    from approvals.bulk import start_bulk_job

    owner = User.objects.create_superuser("root", password="pw")
    return start_bulk_job("terminate", RunFilters(status="attention"), user=owner,
                          reason="incident")[0]


def test_a_poll_sends_the_browser_to_sign_in_and_back_to_its_page(stuck_run, job):
    client = Client()
    for part, page in _polls(stuck_run, job):
        response = client.get(part, **_htmx(page))
        assert response.status_code == 200, part
        assert response["HX-Redirect"] == f"{reverse('login')}?next={_quoted(page)}", part
        assert b"<form" not in response.content, part


def _quoted(page: str) -> str:
    from urllib.parse import quote

    return quote(page, safe="/")


def test_a_page_of_another_site_is_not_where_signing_in_leads(stuck_run):
    detail = reverse("console:run", args=[stuck_run.pk])
    response = Client().get(f"{detail}?part=live", HTTP_HX_REQUEST="true",
                            HTTP_HX_CURRENT_URL="https://elsewhere.example/runs/")
    assert response["HX-Redirect"] == f"{reverse('login')}?next=/"


def test_an_action_sent_by_htmx_is_refused_with_401_and_nothing_is_changed(stuck_run):
    records = AuditRecord.objects.filter(run=stuck_run).count()
    detail = reverse("console:run", args=[stuck_run.pk])
    for action in ("terminate", "resume", "reconcile"):
        response = Client().post(reverse("console:action", args=[stuck_run.pk, action]),
                                 {"seen": str(stuck_run.audit_seq), "reason": "incident"},
                                 **_htmx(detail))
        assert response.status_code == 401
        assert "HX-Redirect" not in response
        body = response.content.decode()
        assert "You are signed out" in body and "nothing was changed" in body
        assert f'href="{reverse("login")}?next={_quoted(detail)}"' in body
    assert AuditRecord.objects.filter(run=stuck_run).count() == records
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION


def test_the_bulk_and_pause_forms_sent_by_htmx_change_nothing_either(stuck_run, job):
    runs = reverse("console:runs")
    posts = [(reverse("console:bulk"), {"action": "terminate", "run": str(stuck_run.pk),
                                        "reason": "incident"}),
             (reverse("console:bulk_cancel", args=[job.pk]), {}),
             (reverse("console:save_view"), {"name": "mine", "query": "status=attention"})]
    for url, data in posts:
        assert Client().post(url, data, **_htmx(runs)).status_code == 401, url
    assert BulkJob.objects.get(pk=job.pk).status == "running"
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION


def test_without_htmx_a_page_still_redirects_to_sign_in(stuck_run):
    detail = reverse("console:run", args=[stuck_run.pk])
    response = Client().get(f"{detail}?part=live")
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={_quoted(detail)}%3Fpart%3Dlive"


@pytest.mark.parametrize("referer, back_to", [
    ("{host}/runs/?status=attention", "/runs/?status=attention"),
    ("https://elsewhere.example/runs/", "/"),
    (None, "/"),
])
def test_a_form_sent_without_htmx_leads_through_sign_in_back_to_its_page(
        stuck_run, operator, referer, back_to):
    """Not to the address it was sent to, which takes only POST: signing in led to a bare
    405 there."""
    headers = {"HTTP_REFERER": referer.format(host=HOST)} if referer else {}
    client = Client()
    posted = client.post(reverse("console:bulk"), {
        "action": "terminate", "run": str(stuck_run.pk), "reason": "incident",
        f"seen-{stuck_run.pk}": str(stuck_run.audit_seq)}, **headers)
    assert posted.status_code == 302
    assert posted["Location"] == f"{reverse('login')}?next={_quoted(back_to)}"
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
    sign_in = client.get(posted["Location"]).content.decode()
    assert "You were signed out, so nothing was changed: send the form again." in sign_in
    signed_in = client.post(posted["Location"], {"username": "olga", "password": "pw",
                                                 "next": back_to}, follow=True)
    assert signed_in.status_code == 200
    assert signed_in.redirect_chain[0][0] == back_to
