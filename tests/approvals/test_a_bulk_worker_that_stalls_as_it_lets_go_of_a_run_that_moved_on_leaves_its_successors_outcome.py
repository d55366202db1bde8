"""A real Celery worker that finds, with the run locked, that its claimed run moved on (left
the job's filter) lets go of its claim: nothing was done to the run, and it has no outcome.
It lets go under the job's lease (approvals.bulk_input.settle_claim), as every outcome is
written: a worker that stalled past its lease meanwhile and was replaced deletes nothing.
Let go without that check, its stale claim's removal landed on the claim its successor had
taken up and acted on (the run came back into the filter): the run was terminated and the
job counted it as not acted on.

Here the first worker stalls in its check that the run still matches the filter (another
session holds the steps table, which that check reads), past its lease; a second process
takes the job over, and acts on the run once it is back in the filter. Sessions hold the
run's row, its outcome row and the job's table so that each step comes in this order."""

import threading

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import bulk_progress, marked, start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from approvals.timeouts import clock
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.models import Run, RunStatus, Step, StepStatus
from runs.reads.selectors import RunFilters
from tests.approvals.run_lock_order import session
from tests.factories import new_run, place
from tests.processes import manage, start_worker, stop, succeeded, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2


def waiting(kind: str | None = None) -> int:
    """How many sessions wait for a lock (`kind`: of that kind, e.g. 'relation')."""
    with session(autocommit=True) as probe:
        return probe.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
            "datname = current_database() AND (%s::text IS NULL OR wait_event = %s)",
            [kind, kind]).fetchone()[0]


def finished_its_task(log) -> bool:
    text = log.read_text()
    return "approvals.bulk_job[" in text and "succeeded in" in text


def test_a_stalled_worker_letting_go_of_a_moved_on_run_deletes_nothing_of_its_successor(
        tmp_path):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    runs = [place(new_run(), status=RunStatus.ATTENTION,
                  step_statuses={"create-task": StepStatus.FAILED}) for _ in range(3)]
    victim = runs[1]
    run_table, step_table = Run._meta.db_table, Step._meta.db_table
    outcome_table, job_table = BulkOutcome._meta.db_table, BulkJob._meta.db_table
    holder = session()  # the victim's row, until the first worker has claimed it
    holder.execute(f"SELECT id FROM {run_table} WHERE id = %s FOR UPDATE", [victim.pk])
    steps = session()  # the steps table, while the first worker checks the filter
    outcome = session()  # the victim's outcome row, while the stale let-go would delete it
    back = session()  # the victim's row again, while it comes back into the filter
    jobs = session()  # the job's table, until the second process has taken the job
    stalled = successor = None
    try:
        try:
            job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION,
                                                            step_status=StepStatus.FAILED),
                                    user=olga, reason="incident 8")
            stalled = start_worker("stalled", tmp_path, BULK_JOB_LEASE_SECONDS=LEASE,
                                   DB_LOCK_TIMEOUT=0, WORKER_TASK_LOG_LEVEL="INFO")
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=victim.pk).exists()
                     and waiting() == 1, timeout=90,
                     what="the first worker to claim the run and wait for its row")
            # Another person resumes it: it no longer matches the filter.
            holder.execute(f"UPDATE {run_table} SET status = %s WHERE id = %s",
                           [RunStatus.QUEUED, victim.pk])
            steps.execute(f"LOCK TABLE {step_table} IN ACCESS EXCLUSIVE MODE")
            outcome.execute(f"SELECT id FROM {outcome_table} WHERE job_id = %s AND "
                            "run_id = %s FOR UPDATE", [job.pk, victim.pk])
            holder.commit()
            # With the run and the job's row locked, it checks the filter, and stalls.
            wait_for(lambda: waiting("relation") == 1, timeout=60,
                     what="the first worker to stall in its check of the filter")
            wait_for(lambda: BulkJob.objects.filter(pk=job.pk, lease_until__lte=clock())
                     .exists(), timeout=60, what="the first worker's lease to end")
            stalled_mark = BulkJob.objects.get(pk=job.pk).lease_until
            successor = manage("bulk_action", "run", str(job.pk), BULK_JOB_LEASE_SECONDS=60,
                               DB_LOCK_TIMEOUT=0)
            wait_for(lambda: waiting() == 2 or successor.poll() is not None, timeout=60,
                     what="the second process to wait for the job's row")
            assert successor.poll() is None, successor.communicate()
            # The job's table is asked for whole, behind the first worker's action and the
            # second process's take (which holds the table already, as it waits for the
            # job's row). The first worker's let-go asks for the table once its action has
            # ended, and so waits until the take has committed: left to itself, it could
            # reach the job's row before the second process woke to take it (under load)
            # and let go under a lease nobody had taken yet, holding the job's row (and the
            # second process behind it) while it waited for the outcome row held here.
            whole = threading.Thread(target=jobs.execute, args=(
                f"LOCK TABLE {job_table} IN EXCLUSIVE MODE",))
            whole.start()
            wait_for(lambda: waiting() == 3, timeout=60,
                     what="the job's table to be asked for behind the second process")
            # The run is asked for again now, first in line after the first worker (before
            # the second process reaches it), to bring it back into the filter.
            relock = threading.Thread(target=back.execute, args=(
                f"SELECT id FROM {run_table} WHERE id = %s FOR UPDATE", [victim.pk]))
            relock.start()
            wait_for(lambda: waiting() == 4, timeout=60,
                     what="the run to be asked for again behind the first worker")
            # The check goes on and finds the run moved on; the second process takes the
            # job as the first ends its action, before the first lets go of its claim.
            steps.rollback()
            relock.join(timeout=60)
            assert not relock.is_alive()
            whole.join(timeout=60)
            assert not whole.is_alive()
            assert BulkJob.objects.get(pk=job.pk).lease_until != stalled_mark
            back.execute(f"UPDATE {run_table} SET status = %s WHERE id = %s",
                         [RunStatus.ATTENTION, victim.pk])
            jobs.rollback()
            # The second process waits for the run; the first has gone (its let-go
            # refused: the job is no longer its) or, let go without the check, waits to
            # delete the claim.
            wait_for(lambda: waiting() == 2 or (
                finished_its_task(tmp_path / "stalled.log") and waiting() == 1),
                timeout=60, what="the second process to reach the run")
            back.commit()
            # The second process acts on the run and waits to write its outcome.
            wait_for(lambda: AuditRecord.objects.filter(
                run=victim, reason=marked(job.reason, job.pk)).exists(), timeout=60,
                what="the second process to act on the run")
        finally:
            for held in (holder, steps, outcome, back, jobs):
                held.rollback()
                held.close()
        succeeded(successor)
        wait_for(lambda: BulkJob.objects.get(pk=job.pk).status == "done", timeout=60,
                 what="the job to finish")
        wait_for(lambda: finished_its_task(tmp_path / "stalled.log"), timeout=60,
                 what="the first worker to go on after the run")
    finally:
        if successor is not None and successor.poll() is None:
            successor.kill()
            successor.wait()
        if stalled is not None:
            stop(stalled)

    rows = list(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome",
                                                                  "message"))
    # The run the second process terminated is counted as done, not as not acted on.
    assert bulk_progress(job.pk).counts == {"done": 3}, rows
    assert bulk_progress(job.pk).skipped == 0
    for run in runs:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert AuditRecord.objects.filter(run=run, action="terminated").count() == 1, run.pk
