"""A real worker's database session killed (pg_terminate_backend) in the middle of a bulk
job's action on a run, its transaction open: nothing of that action is written, the claim
is left, and once the job's lease is over the sweep hands the job on and it is finished:
each run acted on once, with one record, the counts all "done"."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals import tasks
from approvals.bulk import bulk_progress, marked, start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, StepStatus
from runs.reads.selectors import RunFilters
from tests.approvals.run_lock_order import session
from tests.factories import new_run, place
from tests.processes import start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2


def waiting_sessions() -> list[int]:
    with session(autocommit=True) as probe:
        return [pid for (pid,) in probe.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()").fetchall()]


def test_a_worker_whose_session_dies_mid_action_leaves_the_job_to_be_finished(tmp_path):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(5)]
    victim = runs[2]
    holder = session()
    holder.execute(f"SELECT id FROM {Run._meta.db_table} WHERE id = %s FOR UPDATE",
                   [victim.pk])
    worker = None
    try:
        try:
            job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION),
                                    user=olga, reason="incident 11")
            worker = start_worker("worker", tmp_path, BULK_JOB_LEASE_SECONDS=LEASE)
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=victim.pk).exists()
                     and len(waiting_sessions()) == 1, timeout=90,
                     what="the worker to claim the run and wait for its row")
            (pid,) = waiting_sessions()
            with session(autocommit=True) as killer:
                assert killer.execute("SELECT pg_terminate_backend(%s, 5000)",
                                      [pid]).fetchone()[0]
        finally:
            holder.rollback()
            holder.close()
        assert not AuditRecord.objects.filter(run=victim,
                                              reason=marked(job.reason, job.pk)).exists()

        def finished():
            tasks.sweep()  # as beat would: a job whose lease is over goes to a worker again
            return BulkJob.objects.get(pk=job.pk).status == "done"

        wait_for(finished, timeout=90, interval=1, what="the job to be finished")
    finally:
        if worker is not None:
            stop(worker)
    assert bulk_progress(job.pk).counts == {"done": 5}
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1, run.pk
        assert AuditRecord.objects.filter(run=run, reason=marked(job.reason, job.pk)) \
            .count() == 1, run.pk
