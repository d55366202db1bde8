"""A bulk job whose worker met a run held by another session left idle in its transaction
(a psql prompt, a stuck script) waited on it without end. Its lease ran out meanwhile, the
approvals sweep handed the job to another worker, which waited on the same run, and so on
each lease: one held row took every worker in turn. Now the job's task waits at most
DB_LOCK_TIMEOUT for a run (approvals.tasks.bulk_job): that run is answered refused, saying
another session held it and nothing was done to it, and the job goes on with the others.
Acted on again once the row is free, the run is acted on once."""

import io
import threading

import pytest
from django.core.management import call_command
from django.db import connection

from approvals import tasks
from approvals.bulk import bulk_progress, start_bulk_job
from approvals.models import BulkOutcome
from runs.models import Run, RunStatus
from tests.approvals.run_lock_order import session
from tests.approvals.test_bulk_jobs import ATTENTION, failed_run, marked_records, people  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def the_jobs_task_in_a_thread(job_id: int) -> threading.Thread:
    def work():
        try:
            tasks.bulk_job(job_id)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_a_held_run_is_refused_with_why_the_others_are_acted_on_and_it_once_after(
        people, settings):  # noqa: F811
    settings.DB_LOCK_TIMEOUT = 1
    olga, _ = people
    held, *others = [failed_run() for _ in range(3)]
    job, _ = start_bulk_job("terminate", ATTENTION, user=olga, reason="vendor fraud")

    holder = session()
    try:
        holder.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [held.pk])
        thread = the_jobs_task_in_a_thread(job.pk)
        # Without the bound the worker waits here for as long as the row is held.
        thread.join(timeout=120)
        assert not thread.is_alive(), "the job's worker waited for the held run"
    finally:
        holder.rollback()
        holder.close()

    assert bulk_progress(job.pk).counts == {"done": 2, "refused": 1}
    refusal = BulkOutcome.objects.get(job=job, run_id=held.pk)
    assert "another session held the run" in refusal.message
    assert "nothing was done" in refusal.message
    assert Run.objects.get(pk=held.pk).status == RunStatus.ATTENTION
    assert marked_records(job, held) == 0
    for run in others:
        assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
        assert marked_records(job, run) == 1

    again, _ = start_bulk_job("terminate", ATTENTION, user=olga, reason="vendor fraud")
    tasks.bulk_job(again.pk)
    assert bulk_progress(again.pk).counts == {"done": 1}
    assert Run.objects.get(pk=held.pk).status == RunStatus.TERMINATED
    assert marked_records(again, held) == 1
    call_command("verify_audit", stdout=io.StringIO())
