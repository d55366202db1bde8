"""bulk_action run, show and cancel act on a job as it was started: its filters and its
reason are the job's own, and run acts as the person who started it. A filter, a reason,
or (for run) a --user given to them is refused by name, as run_action refuses an option
its action does not read: dropped unseen, it would seem to narrow the job, to be recorded
with the cancel, or to name who acts."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from approvals.models import BulkJob, BulkJobStatus, BulkOutcome
from audit.models import AuditRecord
from runs.models import Run, RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _call(*args) -> str:
    out = io.StringIO()
    call_command(*map(str, args), stdout=out)
    return out.getvalue()


@pytest.fixture
def job(operator) -> BulkJob:
    place(new_run(), status=RunStatus.COMPLETED)
    started = json.loads(_call("bulk_action", "start", "terminate", "--user", "olga",
                               "--workflow", "test-orders", "--status", "completed",
                               "--reason", "cleanup", "--json"))
    return BulkJob.objects.get(pk=started["job"])


def _written() -> tuple:
    return (list(BulkJob.objects.values("pk", "status", "cancelled_by_id", "reason")),
            BulkOutcome.objects.count(), AuditRecord.objects.count(),
            sorted(Run.objects.values_list("pk", "status", "audit_seq")))


@pytest.mark.parametrize(("verb", "given", "named"), [
    ("cancel", ["--reason", "wrong filter"], "--reason does not apply to cancel"),
    ("cancel", ["--status", "attention", "-q", "INV-1"],
     "--status, --search do not apply to cancel"),
    ("show", ["--workflow", "test-orders", "--attention"],
     "--workflow, --attention do not apply to show"),
    ("run", ["--user", "olga"], "--user does not apply to run"),
    ("run", ["--reason", "again", "--stuck"], "--reason, --stuck do not apply to run"),
])
def test_an_option_the_job_would_not_read_is_refused_and_nothing_changes(job, verb, given,
                                                                         named):
    user = [] if verb == "run" else ["--user", "olga"]
    before = _written()
    with pytest.raises(CommandError, match=f"^{named}: the job keeps the filters and reason "
                                           "it was started with.*Nothing was done.$"):
        _call("bulk_action", verb, job.pk, *user, *given)
    assert _written() == before
    assert BulkJob.objects.get(pk=job.pk).status == BulkJobStatus.RUNNING


def test_run_without_them_carries_the_job_out(job):
    shown = json.loads(_call("bulk_action", "run", job.pk, "--json"))
    assert shown["status"] == BulkJobStatus.DONE and shown["handled"] == 1
    assert BulkOutcome.objects.filter(job=job).count() == 1
