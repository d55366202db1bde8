"""A bulk job's worker claims a run (its own commit), then acts on it and writes the outcome.
A job cancelled between the two, or whose worker died between them and was then cancelled,
kept that run "claimed" for ever: no worker takes a cancelled job again, so its page and
`bulk_action show` said a run was being handled that never would be, and did not say
whether the action had happened. The cancel now settles such claims from the run's audit
trail, as a worker taking a job over does: done where the job's record is there, else no
outcome (nothing was done to the run)."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import bulk
from approvals.bulk import bulk_progress, cancel_bulk_job, marked, run_bulk_job, start_bulk_job
from approvals.models import BulkOutcome
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


class WorkerDied(BaseException):
    """The worker stops where it is, as SIGKILL would stop it."""


@pytest.fixture
def olga(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga")
    user.groups.add(Group.objects.get(name="operators"))
    return user


@pytest.fixture
def job_and_runs(olga):
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(3)]
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason="incident 42")
    return job, runs


def at(monkeypatch, point: str, run: Run, then) -> None:
    """Do `then` when the job's worker reaches `point` for `run`."""
    reach = bulk.crashpoints.reach

    def reached(where: str, name: str) -> None:
        if (where, name) == (point, str(run.pk)):
            then()
        reach(where, name)

    monkeypatch.setattr(bulk.crashpoints, "reach", reached)


def test_cancelled_between_the_claim_and_the_action(job_and_runs, olga, monkeypatch):
    job, runs = job_and_runs
    at(monkeypatch, "bulk_claimed", runs[1], lambda: cancel_bulk_job(job.pk, user=olga))

    assert run_bulk_job(job.pk).status == "cancelled"

    assert bulk_progress(job.pk).counts == {"done": 1}
    assert not BulkOutcome.objects.filter(job=job, run_id=runs[1].pk).exists()
    assert [Run.objects.get(pk=run.pk).status for run in runs] == [
        RunStatus.TERMINATED, RunStatus.ATTENTION, RunStatus.ATTENTION]
    assert not AuditRecord.objects.filter(run=runs[1],
                                          reason=marked(job.reason, job.pk)).exists()


def test_a_worker_that_died_after_acting_then_the_job_cancelled(job_and_runs, olga,
                                                                 monkeypatch):
    job, runs = job_and_runs

    def die():
        raise WorkerDied

    at(monkeypatch, "bulk_acted", runs[1], die)
    with pytest.raises(WorkerDied):
        run_bulk_job(job.pk)
    assert bulk_progress(job.pk).counts == {"done": 1, "claimed": 1}

    assert cancel_bulk_job(job.pk, user=olga)

    outcome = BulkOutcome.objects.get(job=job, run_id=runs[1].pk)
    assert (outcome.outcome, outcome.message) == (
        "done", "done (found in the audit trail once the job was cancelled)")
    assert bulk_progress(job.pk).counts == {"done": 2}
    assert Run.objects.get(pk=runs[1].pk).status == RunStatus.TERMINATED
    assert AuditRecord.objects.filter(run=runs[1], action="terminated").count() == 1
    assert Run.objects.get(pk=runs[2].pk).status == RunStatus.ATTENTION
