"""A real Celery worker that stalls in the middle of a bulk job's run (here: waiting for the
run's row, which another session holds) past the job's lease: a second process takes the
job over and settles the claim the first left. When the first goes on, it does not act on
that run nor on any other: it lost the job. Each run is acted on once, by one of the two,
and the job's counts say what happened (every run done, none "refused" for the action the
job itself took on it)."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import bulk_progress, marked, start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from approvals.timeouts import clock
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.approvals.run_lock_order import session
from tests.factories import new_run, place
from tests.processes import manage, start_worker, stop, succeeded, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2


def lease_over(job) -> bool:
    return BulkJob.objects.filter(pk=job.pk, lease_until__lte=clock()).exists()


def waiting_on_locks() -> int:
    with session(autocommit=True) as probe:
        return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                             "'Lock' AND datname = current_database()").fetchone()[0]


def finished_its_task(log) -> bool:
    text = log.read_text()
    return "approvals.bulk_job[" in text and "succeeded in" in text


def test_a_stalled_worker_whose_job_was_taken_over_acts_on_no_run(tmp_path):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(5)]
    victim = runs[2]
    holder = session()
    holder.execute(f"SELECT id FROM {Run._meta.db_table} WHERE id = %s FOR UPDATE",
                   [victim.pk])
    stalled = successor = None
    try:
        try:
            # Started (and handed to a worker) once committed: the first worker takes it.
            job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION),
                                    user=olga, reason="incident 8")
            # It stalls until the test lets it go: its wait for the run is not cut short by
            # DB_LOCK_TIMEOUT (a run held that long while the worker still held the job is
            # rightly answered as refused, before any successor). Celery's "Task ...
            # succeeded" line says when its task is over.
            stalled = start_worker("stalled", tmp_path, BULK_JOB_LEASE_SECONDS=LEASE,
                                   DB_LOCK_TIMEOUT=0, WORKER_TASK_LOG_LEVEL="INFO")
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=victim.pk).exists()
                     and waiting_on_locks() == 1, timeout=90,
                     what="the first worker to claim the run and wait for its row")
            # Its lease is over by the database's clock: by the rules, the job is anybody's.
            wait_for(lambda: lease_over(job), timeout=60, what="the first worker's lease to end")
            successor = manage("bulk_action", "run", str(job.pk), BULK_JOB_LEASE_SECONDS=60)
            wait_for(lambda: waiting_on_locks() == 2 or successor.poll() is not None,
                     timeout=60, what="the second process to take the job and reach the run")
            assert successor.poll() is None, successor.communicate()
        finally:
            holder.rollback()  # the run's row is free: both go on
            holder.close()
        succeeded(successor)
        wait_for(lambda: BulkJob.objects.get(pk=job.pk).status == "done", timeout=60,
                 what="the job to finish")
        # The first worker's task ends once it went on from the run and found the job lost.
        wait_for(lambda: finished_its_task(tmp_path / "stalled.log"), timeout=60,
                 what="the first worker to go on after the run")
    finally:
        if successor is not None and successor.poll() is None:
            successor.kill()
            successor.wait()
        if stalled is not None:
            stop(stalled)
    assert bulk_progress(job.pk).counts == {"done": 5}, \
        list(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome", "message"))
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1, run.pk
        assert AuditRecord.objects.filter(run=run, reason=marked(job.reason, job.pk)) \
            .count() == 1, run.pk
