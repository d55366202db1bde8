"""A bulk action whose filter matches no run the person may see is refused, naming the
filter, by the console's bulk form, `manage.py bulk_action start` and `POST /api/bulk` alike
(approvals.bulk.start_bulk_job, which all three call): no job row, nothing handed to a
worker. A job of no run would be done at once, as if it had acted on something."""

import html
import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from api.tokens import token_create
from approvals.bulk import start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from audit.models import AuditRecord
from runs.models import RunStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

REFUSED = "the filter (status='completed') matches no run you may see"


@pytest.fixture
def attention_run():
    # A run the same person may see and act on: only the filter leaves it out.
    return place(new_run(), status=RunStatus.ATTENTION)


def _nothing_written(records_before: int) -> None:
    assert not BulkJob.objects.exists()
    assert not BulkOutcome.objects.exists()
    assert AuditRecord.objects.count() == records_before


def test_the_consoles_bulk_form_refuses_it_naming_the_filter(
        client_for, operator, attention_run, django_capture_on_commit_callbacks):
    records = AuditRecord.objects.count()
    with django_capture_on_commit_callbacks() as hints:
        response = client_for(operator).post(
            reverse("console:bulk_start"),
            {"status": "completed", "action": "terminate", "reason": "tenant left",
             "previewed": "0", "query": "status=completed"}, follow=True)
    assert response.status_code == 200
    assert f"Nothing was started: {REFUSED}" in html.unescape(response.content.decode())
    assert hints == []
    _nothing_written(records)


def test_the_command_refuses_it_naming_the_filter(operator, attention_run,
                                                   django_capture_on_commit_callbacks):
    records = AuditRecord.objects.count()
    with django_capture_on_commit_callbacks() as hints, \
            pytest.raises(CommandError) as refused:
        call_command("bulk_action", "start", "terminate", "--user", "olga", "--reason",
                     "tenant left", "--status", "completed", stdout=io.StringIO())
    assert str(refused.value) == REFUSED
    assert hints == []
    _nothing_written(records)


def test_the_api_refuses_it_with_400_naming_the_filter(client, operator, attention_run,
                                                        django_capture_on_commit_callbacks):
    _, plaintext = token_create(name="erp", workflows=["test-orders"], acting_user=operator)
    records = AuditRecord.objects.count()
    with django_capture_on_commit_callbacks() as hints:
        response = client.post("/api/bulk", {
            "action": "terminate", "reason": "tenant left",
            "filters": {"workflow": "test-orders", "status": "completed"}},
            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_bulk_job"
    assert response.json()["detail"] == ("the filter (status='completed', "
                                           "workflow='test-orders') matches no run you may see")
    assert hints == []
    _nothing_written(records)


def test_the_same_start_with_a_filter_that_matches_a_run_makes_its_job(operator,
                                                                       attention_run):
    job, created = start_bulk_job("terminate", RunFilters(status="attention"), user=operator,
                                  reason="tenant left")
    assert created and job.total == 1
    assert BulkJob.objects.count() == 1
