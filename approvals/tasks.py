"""Celery tasks: a thin wrapper around the approvals sweep (scheduled by console.celery)."""

import logging

from celery import shared_task
from django.conf import settings

from runs import store
from runs.execution.database_outage import beat_pass

from . import bulk, bulk_approved, bulk_lease, schedule
from .models import BulkJobStatus

logger = logging.getLogger(__name__)


@shared_task(name="approvals.sweep")
@beat_pass("approvals.sweep")
def sweep() -> dict:
    report = schedule.sweep().as_dict()
    # Bulk jobs no worker holds (just started, or their worker died, or one of the release
    # before marked it done before applying its approval) go to a worker.
    bulk_approved.reopen_left_unapplied()
    for job_id in bulk_lease.stalled_jobs():
        bulk_lease.hand_over(job_id)
    return report


@shared_task(name=bulk_lease.BULK_JOB_TASK)
def bulk_job(job_id: int) -> None:
    """A few batches of a bulk job, then the rest in the next task (other work interleaves)."""
    # A run another session holds (left idle in a transaction) is answered as refused to
    # the person after DB_LOCK_TIMEOUT (bulk._one), not waited for: each worker handed the
    # job after the last's lease ran out would wait on it too, until none was left.
    with store.current().lock_wait_at_most(settings.DB_LOCK_TIMEOUT):
        job = bulk.run_bulk_job(job_id, batches=5)
    if job.status == BulkJobStatus.RUNNING and job.lease_until is None:
        bulk_lease.hand_over(job_id)
