"""A bulk job applying its approval (approvals.bulk_approved) is cancelled as any running
job is: its worker acts on no run after the cancel, what it did stays done (each run once),
the runs it did not reach keep waiting untouched, and no worker taking the job up later
acts on them. Only its starter (or a superuser) may cancel it, not its approver."""

import uuid

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import bulk
from approvals.bulk import BulkForbidden, bulk_progress, cancel_bulk_job, run_bulk_job
from approvals.decisions import decide
from approvals.models import BulkJob, BulkOutcome
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


def test_a_cancel_between_two_batches_stops_the_approval_where_it_was(people, monkeypatch):
    olga, carl = people
    runs = [run_with_an_effect() for _ in range(5)]
    job = bulk_terminate(user=carl)
    assert decide(job.approval_id, user=olga, approved=True,
                  decision_id=uuid.uuid4()).recorded
    monkeypatch.setattr(bulk, "BATCH", 2)

    job = run_bulk_job(job.pk, batches=1)  # a worker does one batch, and hands on
    assert (job.status, job.phase) == ("running", "applying")
    with pytest.raises(BulkForbidden):
        cancel_bulk_job(job.pk, user=olga)
    assert cancel_bulk_job(job.pk, user=carl)
    run_bulk_job(job.pk)  # the next worker takes it up: nothing is left to it

    job = BulkJob.objects.get(pk=job.pk)
    assert job.status == "cancelled" and job.cancelled_by == carl
    assert bulk_progress(job.pk).counts == {"done": 2, "second_person": 3}
    for run in runs[:2]:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1
    for run in runs[2:]:
        assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
        assert not AuditRecord.objects.filter(run=run, action="terminated").exists()
        assert BulkOutcome.objects.get(job=job, run_id=run.pk).outcome == "second_person"


def test_a_cancel_before_any_worker_took_the_approved_job_leaves_every_run_as_it_was(people):
    olga, carl = people
    runs = [run_with_an_effect() for _ in range(3)]
    job = bulk_terminate(user=carl)
    assert decide(job.approval_id, user=olga, approved=True,
                  decision_id=uuid.uuid4()).recorded
    assert cancel_bulk_job(job.pk, user=carl)

    run_bulk_job(job.pk)

    assert bulk_progress(job.pk).counts == {"second_person": 3}
    assert {Run.objects.get(pk=r.pk).status for r in runs} == {RunStatus.ATTENTION}
    assert not AuditRecord.objects.filter(run__in=runs, action="terminated").exists()
