"""An invalid bulk filter is refused, never read as no filter (every run the person may
see): the console's preview and its start say which filter field is wrong and why, count
nothing, start no job and act on no run. The API and the CLI refuse an unknown status the
same way, before any job."""

import html
import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from django.utils import timezone

from api.tokens import token_create
from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

BACKWARDS = {"workflow": "test-orders", "status": "attention",
             "since": "2026-12-03T10:00", "until": "2026-12-01T00:00"}
INVALID = [
    (BACKWARDS, "until (Until): The time range is empty: From must be before Until."),
    ({"workflow": "test-orders", "status": "bogus-status"},
     "status: no status 'bogus-status'; the statuses are: queued, running,"),
    ({"period": "24h", "since": "2026-12-01T00:00"},
     'period (In the last): Choose either a period ("In the last") or dates'),
]


@pytest.fixture
def runs():
    """Runs in attention of two workflows, which the operator may all cancel."""
    return [place(new_run(workflow), status=RunStatus.ATTENTION)
            for workflow in ("test-orders", "test-orders", "test-saga")]


def _nothing_started(runs, records_before: int) -> None:
    assert not BulkJob.objects.exists()
    assert AuditRecord.objects.count() == records_before
    assert [Run.objects.get(pk=run.pk).status for run in runs] == [RunStatus.ATTENTION] * 3


@pytest.mark.parametrize("filters, named", INVALID)
def test_the_preview_names_the_invalid_field_and_offers_nothing_to_start(
        client_for, operator, runs, filters, named):
    page = client_for(operator).get(reverse("console:bulk_preview"),
                                    {**filters, "action": "cancel"})
    body = html.unescape(page.content.decode())
    assert page.status_code == 400
    assert f"Invalid filter field {named}" in body
    assert "runs match" not in body and "every run you may see" not in body
    assert f'action="{reverse("console:bulk_start")}"' not in body


@pytest.mark.parametrize("filters, named", INVALID)
def test_starting_with_an_invalid_filter_starts_no_job_and_names_the_field(
        client_for, operator, runs, filters, named, django_capture_on_commit_callbacks):
    before = AuditRecord.objects.count()
    with django_capture_on_commit_callbacks(execute=True) as hints:
        response = client_for(operator).post(reverse("console:bulk_start"), {
            **filters, "action": "cancel", "reason": "vendor incident"})
    assert response.status_code == 400
    assert f"Invalid filter field {named}" in html.unescape(response.content.decode())
    assert hints == []
    _nothing_started(runs, before)


def test_a_valid_time_range_is_previewed_and_kept_by_the_job(client_for, operator, runs):
    now = timezone.now()
    window = {"workflow": "test-orders", "status": "attention",
              "since": (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"),
              "until": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")}
    client = client_for(operator)
    page = client.get(reverse("console:bulk_preview"), {**window, "action": "cancel"})
    assert page.status_code == 200 and "<strong>2</strong> runs match" in page.content.decode()
    client.post(reverse("console:bulk_start"), {**window, "action": "cancel",
                                                "reason": "vendor incident"})
    job = BulkJob.objects.get()
    assert job.total == 2 and job.filters["since"] and job.filters["until"]


def test_the_api_and_the_cli_refuse_an_unknown_status_and_start_nothing(client, operator,
                                                                        runs):
    before = AuditRecord.objects.count()
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    refused = client.post("/api/bulk", {"action": "cancel", "reason": "vendor incident",
                                        "filters": {"status": "bogus-status"}},
                          content_type="application/json",
                          HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert refused.status_code == 422
    assert ["filters", "status"] in [e["loc"] for e in refused.json()["errors"]]
    with pytest.raises(CommandError, match="--status: no status 'bogus-status'; the statuses"):
        call_command("bulk_action", "start", "cancel", "--user", "olga", "--reason",
                     "vendor incident", "--status", "bogus-status", stdout=io.StringIO())
    _nothing_started(runs, before)
