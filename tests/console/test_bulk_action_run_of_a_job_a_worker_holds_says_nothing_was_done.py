"""bulk_action run JOB carries a job out in this process, unless a worker holds its lease:
then nothing is done here, and the command says so and exits non-zero instead of printing
the job's status (still running, nothing handled) as if it had carried it out."""

import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from approvals.models import BulkJob, BulkJobStatus, BulkOutcome
from runs.models import Run, RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(operator) -> BulkJob:
    place(new_run(), status=RunStatus.ATTENTION)
    out = io.StringIO()
    call_command("bulk_action", "start", "resume", "--user", "olga", "--workflow",
                 "test-orders", "--status", "attention", "--reason", "fixed", "--json",
                 stdout=out)
    return BulkJob.objects.get(pk=json.loads(out.getvalue())["job"])


def test_a_job_a_worker_holds_is_left_to_it_and_the_command_says_so(job):
    BulkJob.objects.filter(pk=job.pk).update(lease_until=timezone.now() + timedelta(hours=1))
    out = io.StringIO()
    with pytest.raises(CommandError, match=rf"^bulk job {job.pk} is held by a worker until "
                                           r".*Nothing was done here"):
        call_command("bulk_action", "run", str(job.pk), stdout=out)
    assert out.getvalue() == ""
    fresh = BulkJob.objects.get(pk=job.pk)
    assert fresh.status == BulkJobStatus.RUNNING and fresh.cursor == 0
    assert not BulkOutcome.objects.filter(job=job).exists()
    assert Run.objects.get().status == RunStatus.ATTENTION


def test_a_free_job_is_carried_out_here(job):
    out = io.StringIO()
    call_command("bulk_action", "run", str(job.pk), "--json", stdout=out)
    shown = json.loads(out.getvalue())
    assert shown["status"] == BulkJobStatus.DONE and shown["handled"] == 1
    assert Run.objects.get().status != RunStatus.ATTENTION
