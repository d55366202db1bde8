"""A real Celery worker carrying out a bulk Reconcile (by key) that stalls inside the remote
lookup (here: the workflow's reconcile function waits for a lock the test holds) past the
job's lease: a second process takes the job over and asks again. When the first one's
lookup answers, it records nothing: its lease is checked in the transaction that would
record the answer, not only before the lookup. Each run has one reconcile record, the
second process's, and the job's counts say every run was done once."""

import pytest
from django.contrib.auth.models import Group, Permission, User

from approvals.bulk import bulk_progress, marked, start_bulk_job
from approvals.models import BulkJob, BulkOutcome
from approvals.timeouts import clock
from audit.actions import AuditAction
from audit.models import AuditRecord
from console.roles import ensure_roles
from runs.definitions.definition import registry
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.reads.selectors import RunFilters
from tests.approvals.run_lock_order import session
from tests.approvals.stalling_lookup import LOOKUP_LOCK, NAME, STEP, asked_by, declared
from tests.factories import new_run, place
from tests.processes import manage, start_worker, stop, succeeded, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2
MODULES = "tests.workflows,tests.approvals.stalling_lookup_workflow"


@pytest.fixture
def stalling_lookup():
    flow = declared()
    yield flow
    registry.unregister(flow)


def lease_over(job) -> bool:
    return BulkJob.objects.filter(pk=job.pk, lease_until__lte=clock()).exists()


def waiting_on_locks() -> int:
    with session(autocommit=True) as probe:
        return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                             "'Lock' AND datname = current_database()").fetchone()[0]


def finished_its_task(log) -> bool:
    text = log.read_text()
    return "approvals.bulk_job[" in text and "succeeded in" in text


@pytest.mark.usefixtures("stalling_lookup")
def test_a_stalled_lookups_answer_is_not_recorded_once_the_job_was_taken_over(tmp_path):
    ensure_roles(Group, Permission)
    olga = User.objects.create_user("olga")
    olga.groups.add(Group.objects.get(name="operators"))
    runs = [place(new_run(NAME, wake=False), status=RunStatus.ATTENTION,
                  attention_reason=AttentionReason.UNKNOWN_OUTCOME,
                  step_statuses={STEP: StepStatus.UNKNOWN}) for _ in range(3)]
    holder = session(autocommit=True)
    holder.execute("SELECT pg_advisory_lock(%s)", [LOOKUP_LOCK])
    stalled = successor = None
    try:
        try:
            # Handed to a worker once committed: the first worker takes it.
            job, _ = start_bulk_job("reconcile", RunFilters(workflow=NAME, status="attention"),
                                    user=olga, reason="ledger checked",
                                    params={"step": STEP})
            # It stalls until the test lets it go: its wait for the lock is not cut short
            # by DB_LOCK_TIMEOUT (a lookup that timed out while the worker still held the
            # job would record its error as the answer, rightly, before any successor).
            # Celery's "Task ... succeeded" line says when its task is over.
            stalled = start_worker("stalled", tmp_path, BULK_JOB_LEASE_SECONDS=LEASE,
                                   RUNS_EXTRA_WORKFLOW_MODULES=MODULES, DB_LOCK_TIMEOUT=0,
                                   WORKER_TASK_LOG_LEVEL="INFO")
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=runs[0].pk).exists()
                     and waiting_on_locks() == 1, timeout=90,
                     what="the first worker to claim the first run and stall in its lookup")
            # Its lease is over by the database's clock: by the rules, the job is anybody's.
            wait_for(lambda: lease_over(job), timeout=60, what="the first worker's lease to end")
            successor = manage("bulk_action", "run", str(job.pk), BULK_JOB_LEASE_SECONDS=60,
                               RUNS_EXTRA_WORKFLOW_MODULES=MODULES)
            wait_for(lambda: waiting_on_locks() == 2 or successor.poll() is not None,
                     timeout=60, what="the second process to take the job and ask the run")
            assert successor.poll() is None, successor.communicate()
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", [LOOKUP_LOCK])  # both answered
            holder.close()
        succeeded(successor)
        wait_for(lambda: BulkJob.objects.get(pk=job.pk).status == "done", timeout=60,
                 what="the job to finish")
        # The first worker's task ends once its lookup answered and it tried to record it.
        wait_for(lambda: finished_its_task(tmp_path / "stalled.log"), timeout=60,
                 what="the first worker to go on after its lookup")
    finally:
        if successor is not None and successor.poll() is None:
            successor.kill()
            successor.wait()
        if stalled is not None:
            stop(stalled)
    assert bulk_progress(job.pk).counts == {"done": 3}, \
        list(BulkOutcome.objects.filter(job=job).values_list("run_id", "outcome", "message"))
    # The first worker asked the remote system, and recorded nothing of its answer.
    recorded = [record.data["evidence"] for record in
                AuditRecord.objects.filter(action=AuditAction.RECONCILED)]
    assert not [e for e in recorded if asked_by(stalled.pid) in e], recorded
    for run in runs:
        records = AuditRecord.objects.filter(run=run, action=AuditAction.RECONCILED)
        assert records.count() == 1, list(records.values_list("seq", "data"))
        assert asked_by(successor.pid) in records.get().data["evidence"]
        assert records.get().reason == marked(job.reason, job.pk)
        assert AuditRecord.objects.filter(run=run).count() == \
            Run.objects.get(pk=run.pk).audit_seq
        assert Step.objects.get(run=run, name=STEP).status == StepStatus.UNKNOWN
