"""Celery tasks: a thin wrapper around the approvals sweep (scheduled by console.celery)."""

import logging

from celery import shared_task

from runs.execution.database_outage import beat_pass

from . import bulk, bulk_lease, schedule
from .models import BulkJobStatus

logger = logging.getLogger(__name__)


@shared_task(name="approvals.sweep")
@beat_pass("approvals.sweep")
def sweep() -> dict:
    report = schedule.sweep().as_dict()
    # Bulk jobs no worker holds (just started, or their worker died) go to a worker.
    for job_id in bulk_lease.stalled_jobs():
        bulk.hand_over(job_id)
    return report


@shared_task(name=bulk.BULK_JOB_TASK)
def bulk_job(job_id: int) -> None:
    """A few batches of a bulk job, then the rest in the next task (other work interleaves)."""
    job = bulk.run_bulk_job(job_id, batches=5)
    if job.status == BulkJobStatus.RUNNING and job.lease_until is None:
        bulk.hand_over(job_id)
