"""A bulk worker that claimed a run and then stalled past its lease (before it acted) may
meet, when it goes on, a refusal that comes before its lease is checked (here: the person's
account was deactivated after the successor that took the job acted on that run; a run
held past DB_LOCK_TIMEOUT is another). That refusal is not the run's outcome: the stalled
worker writes nothing over the claim its successor settled. It wrote "forbidden" over
"done", and the job's counts said a run the job terminated was not acted on, whether the
successor had finished the job meanwhile or handed it on."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import bulk_progress, marked, run_bulk_job, start_bulk_job
from approvals.bulk_lease import LEASE
from approvals.models import BulkJob, BulkOutcome
from approvals.timeouts import clock
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.machine import crashpoints
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("successor_batches", [None, 0],
                         ids=["the successor finished the job",
                              "the successor settled the claim and handed the job on"])
def test_a_stalled_worker_leaves_the_outcome_its_successor_wrote(monkeypatch,
                                                                 successor_batches):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(3)]
    victim = runs[0]  # the first run the stalled worker claims, before it renews its lease
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason="incident 12")
    real_reach = crashpoints.reach
    successor_ran = []

    def stalls_after_its_claim(where, point):
        # The stalled worker has claimed the run and not acted yet; its lease is over, so
        # the successor takes the job and settles that claim by acting on the run. Then the
        # person's account is deactivated: the stalled worker is refused before its lease
        # is looked at.
        if (where, point) == ("bulk_claimed", str(victim.pk)) and not successor_ran:
            successor_ran.append(job.pk)  # once: the successor reaches this point too
            run_bulk_job(job.pk, batches=successor_batches)
            User.objects.filter(pk=olga.pk).update(is_active=False)
        return real_reach(where, point)

    monkeypatch.setattr(crashpoints, "reach", stalls_after_its_claim)
    # Its lease, taken a lease and a minute ago by the database's clock, is over already.
    stalled = run_bulk_job(job.pk, now=clock() - LEASE - timedelta(minutes=1))
    monkeypatch.setattr(crashpoints, "reach", real_reach)
    User.objects.filter(pk=olga.pk).update(is_active=True)

    assert successor_ran, "the stalled worker never reached its claim"
    assert stalled.status == ("done" if successor_batches is None else "running")
    assert BulkOutcome.objects.get(job=job, run_id=victim.pk).outcome == "done", \
        list(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome", "message"))
    if successor_batches is not None:
        run_bulk_job(job.pk)  # the next worker finishes what the successor handed on
    assert BulkJob.objects.get(pk=job.pk).status == "done"
    assert bulk_progress(job.pk).counts == {"done": 3}, \
        list(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome", "message"))
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1, run.pk
        assert AuditRecord.objects.filter(run=run, reason=marked(job.reason, job.pk)) \
            .count() == 1, run.pk
