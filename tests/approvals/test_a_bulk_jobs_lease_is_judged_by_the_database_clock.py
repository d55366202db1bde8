"""A bulk job's lease is judged by the database's clock, as a run's lease is: a worker or a
sweep whose own clock runs ahead neither takes nor hands on a job that a live worker holds
(the two would then work it at once, the second settling the first one's claim while it
still acts on that run)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import run_bulk_job, start_bulk_job
from approvals.bulk_lease import LEASE, stalled_jobs
from approvals.models import BulkJob, BulkOutcome
from approvals.timeouts import clock
from console.roles import ensure_roles
from runs import store
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db

AHEAD = timedelta(minutes=10)


@pytest.fixture
def olga(db):
    ensure_roles(Group, Permission)
    user = User.objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operators"))
    return user


@pytest.fixture
def job(olga):
    for _ in range(3):
        place(new_run(), status=RunStatus.ATTENTION,
              step_statuses={"create-task": StepStatus.FAILED})
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason="incident 9")
    # A live worker holds it: its lease runs a while yet, by the database's clock.
    BulkJob.objects.filter(pk=job.pk).update(lease_until=clock() + LEASE)
    return job


@pytest.fixture
def host_clock_ahead(monkeypatch):
    """This process's clock ten minutes ahead of the database's, longer than a lease."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) - AHEAD)


@pytest.mark.usefixtures("host_clock_ahead")
def test_a_host_whose_clock_runs_ahead_neither_hands_on_nor_takes_a_held_job(job):
    assert job.pk not in stalled_jobs()

    assert run_bulk_job(job.pk).status == "running"
    assert not BulkOutcome.objects.filter(job=job).exists()
    assert Run.objects.filter(status=RunStatus.TERMINATED).count() == 0


@pytest.mark.usefixtures("host_clock_ahead")
def test_once_the_lease_is_over_by_the_database_clock_the_job_is_taken_over(job):
    assert run_bulk_job(job.pk, now=clock() + LEASE + timedelta(seconds=1)).status == "done"
    assert Run.objects.filter(status=RunStatus.TERMINATED).count() == 3
