"""A bulk job lists its runs a batch (BATCH, 200) at a time, then acts on each. A run that
left the job's filter between the listing and the action (another person resumed it, in
the incident the job was started for) was acted on all the same: a terminate "of every run
in attention" ended a run that was running again. The job now asks, with the run locked,
whether it still matches the filter: one that moved on is not acted on, and is counted
with the runs the filter no longer matched when reached; the job goes on with the others."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import bulk
from approvals.bulk import bulk_progress, marked, run_bulk_job, start_bulk_job
from approvals.models import BulkOutcome
from approvals.operator_actions import act
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ActionInput
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(db):
    """olga starts the job; carl works the same incident run by run."""
    ensure_roles(Group, Permission)
    users = [User.objects.create_user(name) for name in ("olga", "carl")]
    for user in users:
        user.groups.add(Group.objects.get(name="operators"))
    return users


def test_a_run_resumed_after_its_batch_was_listed_is_not_terminated(people, monkeypatch):
    olga, carl = people
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(3)]
    moved = runs[1]
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason="incident 42")
    reach = bulk.crashpoints.reach

    def carl_resumes_it(where: str, name: str) -> None:
        # The job has listed its batch and claimed the run; carl resumes it first.
        if (where, name) == ("bulk_claimed", str(moved.pk)):
            assert act("resume", moved.pk, user=carl,
                       given=ActionInput(reason="fixed, retrying")).done
        reach(where, name)

    monkeypatch.setattr(bulk.crashpoints, "reach", carl_resumes_it)

    job = run_bulk_job(job.pk)

    assert job.status == "done"
    assert Run.objects.get(pk=moved.pk).status == RunStatus.QUEUED
    assert not AuditRecord.objects.filter(run=moved, action="terminated").exists()
    assert not AuditRecord.objects.filter(run=moved, reason=marked(job.reason, job.pk)).exists()
    assert not BulkOutcome.objects.filter(job=job, run_id=moved.pk).exists()
    progress = bulk_progress(job.pk)
    assert (progress.counts, progress.skipped) == ({"done": 2}, 1)
    for run in (runs[0], runs[2]):
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1
