"""A signed-out htmx request whose HX-Current-URL header is no URL (an unclosed IPv6 host,
which urlsplit refuses) is answered as one naming a page of another site: a poll sends the
browser to sign in and then to the console's first page, an action is refused with the 401
saying nothing was changed. Reading the header raised, and the person was answered 500."""

import pytest
from django.test import Client
from django.urls import reverse

from audit.models import AuditRecord
from runs.models import Run, RunStatus

pytestmark = pytest.mark.django_db

NO_URL = "http://[::1/runs/"


def test_a_poll_whose_page_is_no_url_sends_the_browser_to_sign_in(stuck_run):
    for part in (f"{reverse('console:run', args=[stuck_run.pk])}?part=live",
                 f"{reverse('console:runs')}?rows={stuck_run.pk}",
                 reverse("console:attention")):
        response = Client(raise_request_exception=False).get(
            part, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=NO_URL)
        assert response.status_code == 200, part
        assert response["HX-Redirect"] == f"{reverse('login')}?next=/", part


def test_an_action_whose_page_is_no_url_is_refused_401_and_changes_nothing(stuck_run):
    records = AuditRecord.objects.count()
    response = Client(raise_request_exception=False).post(
        reverse("console:action", args=[stuck_run.pk, "terminate"]),
        {"seen": str(stuck_run.audit_seq), "reason": "incident"},
        HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL=NO_URL)
    assert response.status_code == 401
    assert f'href="{reverse("login")}?next=/"' in response.content.decode()
    assert AuditRecord.objects.count() == records
    assert Run.objects.get(pk=stuck_run.pk).status == RunStatus.ATTENTION
