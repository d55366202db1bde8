"""Bulk by filter in the console: the preview from the runs list's filter, one reason, the
job started in the background, its progress and per-run outcomes, and cancel."""

import pytest
from django.urls import reverse

from approvals.bulk import run_bulk_job
from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _failed(workflow="test-orders"):
    return place(new_run(workflow), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED}
                 if workflow == "test-orders" else None)


def test_preview_start_follow_a_bulk_terminate_by_filter(client_for, finance_operator,
                                                          django_capture_on_commit_callbacks):
    mine = [_failed() for _ in range(3)]
    other = _failed("test-saga")
    client = client_for(finance_operator)
    listing = client.get(reverse("console:runs"), {"status": "attention"}).content.decode()
    assert 'action="/runs/bulk/preview/"' in listing
    page = client.get(reverse("console:bulk_preview"),
                      {"status": "attention", "action": "terminate"}).content.decode()
    assert "<strong>3</strong> runs match" in page and "<strong>3</strong> of them" in page

    refused = client.post(reverse("console:bulk_start"),
                          {"status": "attention", "action": "terminate", "reason": " "},
                          follow=True)
    assert "Nothing was started" in refused.content.decode()
    assert not BulkJob.objects.exists()
    with django_capture_on_commit_callbacks() as hints:
        response = client.post(reverse("console:bulk_start"), {
            "status": "attention", "action": "terminate", "reason": "vendor incident"})
    job = BulkJob.objects.get()
    assert response.url == reverse("console:bulk_job", args=[job.pk]) and len(hints) == 1
    assert job.total == 3
    run_bulk_job(job.pk)
    page = client.get(reverse("console:bulk_job", args=[job.pk])).content.decode()
    assert "Status: <strong>done</strong>. 3 of 3 runs handled." in page
    assert "hx-trigger" not in page
    for run in mine:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert AuditRecord.objects.filter(run=run, action="terminated",
                                          actor_label="fin").count() == 1
    assert Run.objects.get(pk=other.pk).status == RunStatus.ATTENTION


def test_a_job_is_cancelled_from_its_page_and_is_its_owners(client_for, finance_operator,
                                                          operator):
    runs = [_failed() for _ in range(2)]
    client = client_for(finance_operator)
    client.post(reverse("console:bulk_start"),
                {"status": "attention", "action": "resume", "reason": "retry"})
    job = BulkJob.objects.get()
    live = client.get(reverse("console:bulk_job", args=[job.pk])).content.decode()
    assert "hx-trigger" in live and "Cancel the job" in live
    other = client_for(operator)
    assert other.post(reverse("console:bulk_cancel", args=[job.pk])).status_code == 403
    client = client_for(finance_operator)
    assert client.get(reverse("console:bulk_cancel", args=[job.pk])).status_code == 405
    client.post(reverse("console:bulk_cancel", args=[job.pk]))
    assert run_bulk_job(job.pk).status == "cancelled"
    assert all(Run.objects.get(pk=r.pk).status == RunStatus.ATTENTION for r in runs)


@pytest.mark.parametrize("query", ["status=attention&q=" + "x" * 20000,
                                   "status=attention\r\nSet-Cookie: a=b"])
def test_a_refused_job_goes_back_to_its_preview_whatever_query_was_posted(
        client_for, finance_operator, query):
    client = client_for(finance_operator)
    refused = client.post(reverse("console:bulk_start"),
                          {"status": "attention", "action": "terminate", "reason": " ",
                           "query": query})
    assert refused.status_code == 302
    assert refused.url == f"{reverse('console:bulk_preview')}?action=terminate"
    assert "Set-Cookie" not in str(refused.headers.get("Location"))
    page = client.get(refused.url).content.decode()
    assert "Nothing was started" in page
    assert not BulkJob.objects.exists()


def test_a_refused_job_keeps_a_query_that_fits(client_for, finance_operator):
    refused = client_for(finance_operator).post(
        reverse("console:bulk_start"), {"status": "attention", "action": "terminate",
                                        "reason": " ", "query": "status=attention"})
    assert refused.url == f"{reverse('console:bulk_preview')}?status=attention&action=terminate"
