"""The run page's poll (its live part, every few seconds while the run is live) and its
timeline's older pages show no investigation card: they do not aggregate the run's whole
audit log for the card's outline. A run whose chain holds 100,000 records (thousands of
steps) had all of them grouped at every poll of every open page. The full page still reads
the outline once, for its card."""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db

OUTLINE = 'MAX("audit_auditrecord"."seq")'


def _outline_reads(client, url: str, **headers) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url, **headers)
    assert response.status_code in (200, 204), response.status_code
    return sum(OUTLINE in q["sql"] for q in queries.captured_queries)


def test_only_the_full_page_reads_the_outline_of_the_runs_log(client, script):
    client.force_login(User.objects.create_superuser("boss", "boss@example.org", "pw"))
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    page = f"/runs/{run.pk}/"
    assert _outline_reads(client, page) == 1
    assert _outline_reads(client, f"{page}?part=live", HTTP_HX_REQUEST="true") == 0
    assert _outline_reads(client, f"{page}?part=timeline&before=3",
                          HTTP_HX_REQUEST="true") == 0
    # The card drawn from it is still on the full page.
    assert "investigation" in client.get(page).content.decode().lower()
