"""The sweeper (Celery beat, every few seconds): takes back runs whose lease expired and
sends wake-up hints for runs that are due or were never picked up.

Its queries read partial indexes (see Run.Meta.indexes), so their cost follows the number
of due rows, not the size of the table. Expired leases are taken back in batches, a
transaction each, and only one pass runs at a time (runs.machine.single_pass): one that outlasts
the interval is not joined by the next.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings

from .. import store
from ..machine import dispatch, limits, tracing, transitions
from ..machine.single_pass import single_pass
from ..machine.wakeup import send_wakeups
from ..models import Run, RunStatus
from ..waiting import kept, kept_expiry

JOB = "runs.sweep"
# Runs taken back per transaction: few enough that their locks are held for milliseconds.
BATCH = 100


@dataclass
class SweepReport:
    expired: int = 0
    due: int = 0
    requeued: int = 0
    # Kept events delivered to runs that began to wait for them (runs.waiting.kept).
    events: int = 0
    # Kept events past their keep time, marked expired (runs.waiting.kept_expiry).
    events_expired: int = 0
    # Another pass held the job's lock: this one did nothing.
    locked_out: bool = False


def sweep(*, now: datetime | None = None, limit: int = 500) -> SweepReport:
    """One pass of the sweeper, unless another pass is running."""
    with single_pass(JOB) as mine:
        if not mine:
            return SweepReport(locked_out=True)
        return _sweep(now, limit)


def _sweep(now: datetime | None, limit: int) -> SweepReport:
    # Leases and due times are judged by the database server's now() in each statement
    # (unless a caller gives a time): a sweeper whose clock runs ahead takes no live lease.
    server_now = store.time_in_statement(now)
    report = SweepReport()
    expired = list(Run.objects.filter(
        status__in=[RunStatus.RUNNING, RunStatus.COMPENSATING], lease_expires_at__lt=server_now
    ).order_by("pk").values_list("pk", flat=True)[:limit])
    for start in range(0, len(expired), BATCH):
        taken = transitions.expire_leases(expired[start:start + BATCH], now=now)
        report.expired += len(taken)
        if tracing.enabled():
            # The dead worker's span of the step never ended; this one says what became of it.
            for run in Run.objects.filter(pk__in=taken).only(
                    "pk", "workflow_name", "workflow_version", "business_key"):
                tracing.event("lease expired", run, error="worker lost its lease mid-step")
    # A paused workflow's runs are left alone: its retries and timers hold (runs.machine.dispatch).
    held = dispatch.held_runs_filter()
    # Drill runs are advanced by the drill alone (transitions.claim_run): no wake-up for them.
    due = Run.objects.filter(
        status__in=[RunStatus.WAITING, RunStatus.COMPENSATING], next_wake_at__lte=server_now,
        drill=False)
    due = list((due if held is None else due.exclude(held)).values_list("pk", flat=True)[:limit])
    send_wakeups(due)
    report.due = len(due)
    stale = ((now or store.current().now())
             - timedelta(seconds=settings.RUNS_REQUEUE_AFTER_SECONDS))
    lost = Run.objects.filter(status=RunStatus.QUEUED, updated_at__lt=stale, drill=False)
    lost = limits.requeue_order(lost if held is None else lost.exclude(held), limit)
    send_wakeups(lost)
    report.requeued = len(lost)
    # First: an event past its time is expired, never delivered by the pass that follows.
    report.events_expired = kept_expiry.expire_kept_events(now=now)
    report.events = kept.consume_kept_events(now=now)
    return report
