"""The sweeper (Celery beat, every few seconds): takes back runs whose lease expired and
sends wake-up hints for runs that are due or were never picked up.

Its queries read partial indexes (see Run.Meta.indexes), so their cost follows the number
of due rows, not the size of the table.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from . import transitions
from .models import Run, RunStatus
from .wakeup import send_wakeup


@dataclass
class SweepReport:
    expired: int = 0
    due: int = 0
    requeued: int = 0


def sweep(*, now: datetime | None = None, limit: int = 500) -> SweepReport:
    """One pass of the sweeper."""
    now = now or timezone.now()
    report = SweepReport()
    expired = Run.objects.filter(
        status__in=[RunStatus.RUNNING, RunStatus.COMPENSATING], lease_expires_at__lt=now
    ).values_list("pk", flat=True)[:limit]
    for run_id in list(expired):
        if transitions.expire_lease(run_id, now=now):
            report.expired += 1
    due = Run.objects.filter(
        status__in=[RunStatus.WAITING, RunStatus.COMPENSATING], next_wake_at__lte=now
    ).values_list("pk", flat=True)[:limit]
    for run_id in list(due):
        send_wakeup(run_id)
        report.due += 1
    stale = now - timedelta(seconds=settings.RUNS_REQUEUE_AFTER_SECONDS)
    lost = Run.objects.filter(
        status=RunStatus.QUEUED, updated_at__lt=stale
    ).values_list("pk", flat=True)[:limit]
    for run_id in list(lost):
        send_wakeup(run_id)
        report.requeued += 1
    return report
