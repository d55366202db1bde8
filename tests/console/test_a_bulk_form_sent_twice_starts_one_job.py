"""The form that starts a bulk job by filter carries its preview's mark (start_key): sent
twice (a double click, a resend after a slow answer) it starts one job, and the second
answer leads to that job. Another preview's form starts another job; a mark that is no
text the database keeps is refused, nothing started."""

import pytest
from django.urls import reverse

from approvals.bulk import BulkRefused, start_bulk_job
from approvals.models import BulkJob
from runs.models import RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.console.test_a_bulk_job_starts_from_its_preview_with_the_dates_it_previewed import (
    hidden_fields,
)
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _failed():
    return place(new_run(), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED})


def _start_form(client) -> dict:
    preview = client.get(reverse("console:bulk_preview"),
                         {"status": "attention", "action": "terminate"})
    return {**hidden_fields(preview.content.decode()), "reason": "vendor incident"}


def test_the_same_form_sent_twice_starts_one_job_and_wakes_one_worker(
        client_for, operator, django_capture_on_commit_callbacks):
    _failed(), _failed()
    client = client_for(operator)
    form = _start_form(client)
    assert len(form["start_key"]) == 32
    with django_capture_on_commit_callbacks() as hints:
        first = client.post(reverse("console:bulk_start"), form)
        again = client.post(reverse("console:bulk_start"), form)
    job = BulkJob.objects.get()
    assert first.url == again.url == reverse("console:bulk_job", args=[job.pk])
    assert len(hints) == 1  # the job found again by its mark wakes no second worker


def test_the_start_says_whether_it_made_the_job_or_found_it_by_its_mark(operator):
    _failed()
    made, created = start_bulk_job("terminate", RunFilters(status="attention"), user=operator,
                                   reason="vendor incident", start_key="k1")
    found, again = start_bulk_job("terminate", RunFilters(status="attention"), user=operator,
                                  reason="vendor incident", start_key="k1")
    assert (created, again) == (True, False)
    assert found.pk == made.pk and BulkJob.objects.count() == 1


def test_a_new_preview_starts_a_new_job(client_for, operator):
    _failed()
    client = client_for(operator)
    client.post(reverse("console:bulk_start"), _start_form(client))
    client.post(reverse("console:bulk_start"), _start_form(client))
    assert BulkJob.objects.count() == 2


def test_a_mark_that_is_no_text_starts_nothing(operator):
    _failed()
    for key in ("x" * 65, "nul\x00key"):
        with pytest.raises(BulkRefused, match="start_key"):
            start_bulk_job("terminate", RunFilters(status="attention"), user=operator,
                           reason="vendor incident", start_key=key)
    assert not BulkJob.objects.exists()
