"""Celery tasks: a thin wrapper around the approvals sweep (scheduled by console.celery)."""

import logging

from celery import shared_task

from runs.execution.database_outage import beat_pass
from runs.machine.wakeup import BROKER_DOWN

from . import bulk, schedule
from .models import BulkJobStatus

logger = logging.getLogger(__name__)


@shared_task(name="approvals.sweep")
@beat_pass("approvals.sweep")
def sweep() -> dict:
    report = schedule.sweep().as_dict()
    # Bulk jobs no worker holds (just started, or their worker died) go to a worker.
    for job_id in bulk.stalled_jobs():
        hand_over(job_id)
    return report


@shared_task(name="approvals.bulk_job")
def bulk_job(job_id: int) -> None:
    """A few batches of a bulk job, then the rest in the next task (other work interleaves)."""
    job = bulk.run_bulk_job(job_id, batches=5)
    if job.status == BulkJobStatus.RUNNING and job.lease_until is None:
        hand_over(job_id)


def hand_over(job_id: int) -> bool:
    """Send a bulk job to a worker; never raises. The job is stored before this, and one no
    worker holds is found by the approvals sweep (bulk.stalled_jobs) and sent again: a
    broker that is down must not turn a started job into an error its caller would retry,
    starting a second job."""
    try:
        bulk_job.delay(job_id)
    except Exception as exc:  # noqa: BLE001 - a hint, made up for by the sweep
        logger.warning("bulk job %s not handed to a worker now (%s); the approvals sweep "
                       "will", job_id, exc, exc_info=not isinstance(exc, BROKER_DOWN))
        return False
    return True
