"""A real Celery worker SIGKILLed while it works a bulk job through, at the two worst
moments (a run claimed but not acted on; acted on but its outcome not recorded): once the
job's lease is over, the approvals sweep hands it to a second worker, which finishes it.
Every run is acted on exactly once, with one audit record each."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import tasks
from approvals.bulk import bulk_progress, marked, start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.factories import new_run, place
from tests.processes import kill_hard, start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2


@pytest.mark.parametrize("point", ["bulk_claimed", "bulk_acted"])
def test_a_worker_killed_mid_job_is_replaced_and_each_run_is_acted_on_once(tmp_path, point):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(5)]
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason="incident 7")
    victim = runs[2]
    marker = tmp_path / "crashed"
    doomed = start_worker("doomed", tmp_path, BULK_JOB_LEASE_SECONDS=LEASE,
                          RUNS_CRASH_AT=f"{point}:{victim.pk}", RUNS_CRASH_MARKER=marker)
    try:
        tasks.bulk_job.delay(job.pk)
        wait_for(marker.exists, timeout=90, what=f"the worker to reach {point}")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9
    outcomes = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome"))
    assert outcomes == {runs[0].pk: "done", runs[1].pk: "done", victim.pk: "claimed"}
    acted = AuditRecord.objects.filter(run=victim, reason=marked(job.reason, job.pk)).count()
    assert acted == (1 if point == "bulk_acted" else 0)
    assert BulkJob.objects.get(pk=job.pk).status == "running"

    rescuer = start_worker("rescuer", tmp_path, BULK_JOB_LEASE_SECONDS=LEASE)
    try:
        def finished():
            tasks.sweep()  # as beat would: a job no live worker holds is enqueued again
            return BulkJob.objects.get(pk=job.pk).status == "done"

        wait_for(finished, timeout=90, interval=1, what="the second worker to finish the job")
    finally:
        stop(rescuer)
    assert "approvals.bulk_job" in (tmp_path / "rescuer.log").read_text()  # it did the rest
    assert bulk_progress(job.pk).counts == {"done": 5}
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1, run.pk
        assert AuditRecord.objects.filter(run=run, reason=marked(job.reason, job.pk)) \
            .count() == 1
