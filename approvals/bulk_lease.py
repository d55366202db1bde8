"""A bulk job's lease: which worker carries the job out now (approvals.bulk).

A worker takes a job whose lease is free or over and renews it as it goes. The lease's end
time, as the worker wrote it, is also its mark: a worker that stalled past its lease (a
lock it waited for, a paused machine, a lookup that hung) and was replaced finds the mark
changed and stops, instead of working on beside its successor. Each write of the worker is
conditional on the mark, and so is each action it takes on a run: `hold` is checked in the
action's transaction, holding the job's row until that transaction ends, so a successor
takes the job only once the action has committed (and its audit record shows it) or not
at all.

Lease times are the database's clock (approvals.timeouts.clock), as a run's lease is: a
worker whose own clock runs ahead would take a job another worker still holds, and one
whose clock is behind would write a lease already over.
"""

import logging
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Q

from runs.machine.wakeup import BROKER_DOWN

from .models import BulkJob, BulkJobStatus
from .timeouts import clock

logger = logging.getLogger(__name__)

LEASE = timedelta(seconds=settings.BULK_JOB_LEASE_SECONDS)
BULK_JOB_TASK = "approvals.bulk_job"  # approvals.tasks.bulk_job


def hand_over(job_id: int) -> bool:
    """Send a bulk job to a worker; never raises. The job is stored before this, and one no
    worker holds is found by the approvals sweep (stalled_jobs) and sent again: a broker
    that is down must not turn a started job (or an approval recorded for it) into an error
    its caller would retry, starting a second job."""
    try:
        # By name: the task's module (approvals.tasks) imports this one.
        current_app.send_task(BULK_JOB_TASK, args=(job_id,))
    except Exception as exc:  # noqa: BLE001 - a hint, made up for by the sweep
        logger.warning("bulk job %s not handed to a worker now (%s); the approvals sweep "
                       "will", job_id, exc, exc_info=not isinstance(exc, BROKER_DOWN))
        return False
    return True


class LeaseLost(Exception):
    """The job was taken over by another worker, or cancelled, or finished: this worker
    does nothing more on it (in the transaction this is raised in, nothing is written)."""


def take(job_id: int, now: datetime) -> datetime | None:
    """Hold running job `job_id` if its lease is free or over at `now`: the mark of the
    lease taken, or None (another worker holds it, or it is not running)."""
    until = now + LEASE
    taken = BulkJob.objects.filter(Q(lease_until__isnull=True) | Q(lease_until__lte=now),
                                   pk=job_id, status=BulkJobStatus.RUNNING) \
        .update(lease_until=until)
    return until if taken else None


def renew(job_id: int, held: datetime, **changes) -> datetime | None:
    """Renew the lease marked `held`, writing `changes` with it: the new mark, or None if
    the job is no longer this worker's."""
    until = clock() + LEASE
    renewed = BulkJob.objects.filter(pk=job_id, status=BulkJobStatus.RUNNING,
                                     lease_until=held).update(lease_until=until, **changes)
    return until if renewed else None


def release(job_id: int, held: datetime) -> None:
    """Leave the job free for the next worker, if this one still holds it."""
    BulkJob.objects.filter(pk=job_id, lease_until=held).update(lease_until=None)


def hold(job_id: int, held: datetime) -> None:
    """LeaseLost unless the job still runs under the lease marked `held`. Within a
    transaction (an action's), the job's row then stays locked until it ends, and no other
    worker takes the job meanwhile (the take waits for the commit); outside one (before a
    reconcile asks another system by key), it is a check, made again in the transaction
    that records the answer (runs.operator.reconciliation.answers_guarded)."""
    with transaction.atomic():
        if not list(BulkJob.objects.select_for_update(no_key=True).filter(
                pk=job_id, status=BulkJobStatus.RUNNING, lease_until=held)
                .values_list("pk", flat=True)):
            raise LeaseLost(f"bulk job {job_id} is no longer this worker's")


def hold_for_outcome(job_id: int, held: datetime) -> None:
    """LeaseLost if another worker may have taken the job since the lease marked `held`:
    the job runs under another mark, or none (released to the next worker). Within a
    transaction (the one writing a run's outcome), the job's row then stays locked until it
    ends. A job cancelled or finished meanwhile passes: no worker takes it again, so the
    outcome of a run this worker claimed is this worker's to write (where its claim still
    stands)."""
    with transaction.atomic():
        if not list(BulkJob.objects.select_for_update(no_key=True).filter(
                Q(lease_until=held) | ~Q(status=BulkJobStatus.RUNNING), pk=job_id)
                .values_list("pk", flat=True)):
            raise LeaseLost(f"bulk job {job_id} is no longer this worker's")


def stalled_jobs(now: datetime | None = None) -> list[int]:
    """Running jobs no worker holds (never taken, or their worker died), by the database's
    clock, as their leases are written."""
    now = now or clock()
    return list(BulkJob.objects.filter(Q(lease_until__isnull=True) | Q(lease_until__lte=now),
                                       status=BulkJobStatus.RUNNING)
                .values_list("pk", flat=True)[:50])
