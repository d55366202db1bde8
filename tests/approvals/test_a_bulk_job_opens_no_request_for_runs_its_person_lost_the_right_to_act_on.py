"""A bulk job gathers the runs that need a second person and, at its end, opens one
four-eyes request for them in its person's name. A person whose right to the action was
taken away while the job ran (the global permission, or guardian's object permission on the
run's workflow) still had that request opened for every such run: approvers were asked to
decide what could do nothing (approving it was refused run by run). The job's end now asks
the permission rule of each waiting run, as it is then: the runs the person may no longer
act on are told forbidden on the job's page, saying why in words that name the person
alone, and the request, if any, lists only the runs they may still act on.

A real Celery worker works the job; it is held at the third run (another session holds its
row) while the right is taken away, then goes on."""

import pytest
from django.contrib.auth.models import Permission, User
from guardian.shortcuts import assign_perm, remove_perm

from approvals import bulk
from approvals.bulk import bulk_progress, run_bulk_job, start_bulk_job
from approvals.models import ApprovalRequest, BulkJob, BulkOutcome
from audit.models import AuditRecord
from runs.models import Run, RunStatus, Workflow
from runs.reads.selectors import RunFilters
from tests.approvals.bulk_requests import run_with_an_effect
from tests.approvals.run_lock_order import session
from tests.processes import start_worker, stop, wait_for

TERMINATE = "runs.terminate_run"


def waiting_on_locks() -> int:
    with session(autocommit=True) as probe:
        return probe.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
                             "'Lock' AND datname = current_database()").fetchone()[0]


def globally(olga: User) -> None:
    olga.user_permissions.add(Permission.objects.get(codename="terminate_run"))


def take_globally(olga: User) -> None:
    olga.user_permissions.remove(Permission.objects.get(codename="terminate_run"))


def on_the_workflow(olga: User) -> None:
    assign_perm(TERMINATE, olga, Workflow.objects.get(name="test-orders"))


def take_on_the_workflow(olga: User) -> None:
    remove_perm(TERMINATE, olga, Workflow.objects.get(name="test-orders"))


RIGHTS = {"global permission": (globally, take_globally),
          "object permission": (on_the_workflow, take_on_the_workflow)}


def olga_who_sees_every_run() -> User:
    olga = User.objects.create_user("olga", email="olga@example.com")
    olga.user_permissions.add(Permission.objects.get(codename="view_runs"))
    return olga


def assert_forbidden_naming_olga_alone(job: BulkJob, runs: list[Run]) -> None:
    messages = dict(BulkOutcome.objects.filter(job=job).values_list("run_id", "message"))
    for run in runs:
        message = messages[run.pk]
        assert "olga may no longer terminate" in message, message
        assert "needs runs.terminate_run" in message, message
        # Nobody else is named: not the approvers, nor who took the right away.
        assert "omar" not in message and "root" not in message, message
        assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
        assert not AuditRecord.objects.filter(run=run, action="terminated").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("empty_broker")
@pytest.mark.parametrize("right", RIGHTS)
def test_a_real_workers_job_opens_no_request_once_the_right_is_taken_away(right, tmp_path):
    give, take = RIGHTS[right]
    olga = olga_who_sees_every_run()
    give(olga)
    # Someone who would be asked to approve, were a request opened.
    omar = User.objects.create_user("omar", email="omar@example.com")
    omar.user_permissions.add(Permission.objects.get(codename="terminate_run"))
    runs = [run_with_an_effect() for _ in range(5)]
    held_run = runs[2]
    holder = session()
    holder.execute(f"SELECT id FROM {Run._meta.db_table} WHERE id = %s FOR UPDATE",
                   [held_run.pk])
    worker = None
    try:
        try:
            job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION),
                                    user=olga, reason="incident 9")
            # DB_LOCK_TIMEOUT=0: the worker waits for the held row as long as it is held.
            worker = start_worker("bulk", tmp_path, DB_LOCK_TIMEOUT=0)
            wait_for(lambda: BulkOutcome.objects.filter(job=job, run_id=held_run.pk).exists()
                     and waiting_on_locks() == 1, timeout=90,
                     what="the worker to reach two runs and wait for the third's row")
            take(User.objects.get(pk=olga.pk))
        finally:
            holder.rollback()
            holder.close()
        wait_for(lambda: BulkJob.objects.get(pk=job.pk).status == "done", timeout=60,
                 what="the job to finish")
    finally:
        if worker is not None:
            stop(worker)

    job = BulkJob.objects.get(pk=job.pk)
    assert job.approval_id is None
    assert not ApprovalRequest.objects.exists()
    # The first three waited for a second person (the third's check was read before the
    # change); the last two were refused as they were reached.
    assert bulk_progress(job.pk).counts == {"forbidden": 5}
    assert_forbidden_naming_olga_alone(job, runs[:3])


@pytest.mark.django_db
def test_the_request_lists_only_the_runs_the_person_may_still_act_on(monkeypatch):
    olga = olga_who_sees_every_run()
    for name in ("test-orders", "test-charge-then-wait"):
        assign_perm(TERMINATE, olga, Workflow.objects.get(name=name))
    orders = [run_with_an_effect("test-orders") for _ in range(2)]
    charges = [run_with_an_effect("test-charge-then-wait") for _ in range(2)]
    monkeypatch.setattr(bulk, "BATCH", 4)
    job, _ = start_bulk_job("terminate", RunFilters(status=RunStatus.ATTENTION), user=olga,
                            reason="incident 9")
    job = run_bulk_job(job.pk, batches=1)  # all four wait; the job is not done yet
    assert bulk_progress(job.pk).counts == {"second_person": 4}
    remove_perm(TERMINATE, olga, Workflow.objects.get(name="test-orders"))

    job = run_bulk_job(job.pk)

    assert job.status == "done" and job.approval_id is not None
    assert sorted(ApprovalRequest.objects.get(pk=job.approval_id).bulk_runs) == \
        sorted(r.pk for r in charges)
    assert bulk_progress(job.pk).counts == {"second_person": 2, "forbidden": 2}
    assert_forbidden_naming_olga_alone(job, orders)
