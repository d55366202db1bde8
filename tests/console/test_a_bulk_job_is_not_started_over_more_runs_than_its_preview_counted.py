"""A bulk job by filter is started from its preview, whose button names the runs it counted
("Terminate 3 runs in the background"). When more runs the person may act on match the
filter by the time the form is sent (an incident brought them in), nothing is started and
the person is sent back to the preview, which counts them again; fewer is what was
confirmed and starts. A count that is no number is refused."""

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

from approvals.models import BulkJob
from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
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
    body = preview.content.decode()
    fields = hidden_fields(body)
    assert f"Terminate {fields['previewed']} runs in the background" in body
    return {**fields, "reason": "vendor incident"}


def test_more_runs_than_previewed_start_nothing_and_the_preview_counts_them_again(
        client_for, operator):
    previewed = [_failed() for _ in range(3)]
    client = client_for(operator)
    form = _start_form(client)
    assert form["previewed"] == "3"
    arrived = [_failed() for _ in range(2)]  # meanwhile

    refused = client.post(reverse("console:bulk_start"), form)
    assert refused.status_code == 302
    assert refused.url.startswith(reverse("console:bulk_preview"))
    said = [str(m) for m in get_messages(refused.wsgi_request)]
    assert said == ["Nothing was started: the filter matches 5 runs you may terminate now, "
                    "more than the 3 the preview counted. Check them in a new preview, "
                    "then start again (an Until time in the filter leaves out the "
                    "runs that changed after it)"]
    assert not BulkJob.objects.exists()
    for run in previewed + arrived:
        assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
        assert not AuditRecord.objects.filter(run=run, action="terminated").exists()
    again = client.get(refused.url)
    assert "<strong>5</strong> runs match" in again.content.decode()
    assert hidden_fields(again.content.decode())["previewed"] == "5"


def test_as_many_or_fewer_runs_than_previewed_start_the_job(client_for, operator):
    runs = [_failed() for _ in range(3)]
    client = client_for(operator)
    form = _start_form(client)
    Run.objects.filter(pk=runs[0].pk).update(status=RunStatus.QUEUED)  # left the filter
    started = client.post(reverse("console:bulk_start"), form)
    job = BulkJob.objects.get()
    assert started.url == reverse("console:bulk_job", args=[job.pk])
    assert job.total == 2


@pytest.mark.parametrize("count", ["", "-1", "٣", "3.0", "x", "9" * 30])
def test_a_count_that_is_no_number_starts_nothing(client_for, operator, count):
    _failed()
    client = client_for(operator)
    refused = client.post(reverse("console:bulk_start"), {**_start_form(client),
                                                          "previewed": count})
    assert refused.status_code == 302
    said = " ".join(str(m) for m in get_messages(refused.wsgi_request))
    assert "Nothing was started: the form did not say how many runs its preview counted" \
        in said
    assert not BulkJob.objects.exists()
