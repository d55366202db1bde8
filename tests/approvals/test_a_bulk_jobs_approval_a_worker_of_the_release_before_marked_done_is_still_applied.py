"""In a rolling release the approval of a bulk job's request may be decided on the new web
server while a worker of the release before still takes the job's tasks. That worker knows
no phase: handed the approved job, it walks the job's filter again, finds every run settled
or waiting for the second person, makes no request (the job has one) and marks the job
done, the approval never applied, the approver told it was. The approvals sweep finds such
a job (done in its applying phase, runs still waiting) and hands it back to a worker, which
applies the approval once on each waiting run; a job applied whole is left alone."""

import uuid
from collections import Counter

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.utils import timezone

from approvals import tasks
from approvals.bulk import bulk_progress, run_bulk_job
from approvals.decisions import decide
from approvals.models import BulkJob, BulkJobStatus
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus
from tests.approvals.bulk_requests import bulk_terminate, run_with_an_effect

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga decides, carl asks."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name) for name in ("olga", "carl")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


def as_a_worker_of_the_release_before_leaves_it(job: BulkJob) -> None:
    """What that release's run_bulk_job writes at the end of its pass over the filter (its
    bulk._finish, the lease's renewals): the job done, the cursor at the last run."""
    BulkJob.objects.filter(pk=job.pk, status=BulkJobStatus.RUNNING).update(
        status=BulkJobStatus.DONE, finished_at=timezone.now(), lease_until=None,
        cursor=job.last_run_id)


def test_an_approval_a_worker_of_the_release_before_marked_done_is_applied_once(people):
    olga, carl = people
    runs = [run_with_an_effect() for _ in range(3)]
    job = bulk_terminate(user=carl, workflow="test-orders")
    decision = decide(job.approval_id, user=olga, approved=True, decision_id=uuid.uuid4())
    assert decision.recorded, decision.message
    as_a_worker_of_the_release_before_leaves_it(BulkJob.objects.get(pk=job.pk))
    assert bulk_progress(job.pk).counts == {"second_person": 3}

    tasks.sweep()  # as beat would

    job = BulkJob.objects.get(pk=job.pk)
    assert (job.status, job.phase, job.cursor) == ("running", "applying", 0)
    assert {Run.objects.get(pk=r.pk).status for r in runs} == {RunStatus.ATTENTION}
    job = run_bulk_job(job.pk)
    assert (job.status, job.phase) == ("done", "applying")
    assert bulk_progress(job.pk).counts == {"done": 3}

    tasks.sweep()  # the job applied whole is not taken up again
    assert BulkJob.objects.get(pk=job.pk).status == "done"
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        (record,) = AuditRecord.objects.filter(run=run, action="terminated")
        assert (record.actor_label, record.data["approved_by"]) == ("carl", "olga")
        assert [k for k, n in Counter(AuditRecord.objects.filter(run=run).values_list(
            "action", "reason")).items() if n > 1] == []

