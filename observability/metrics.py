"""Prometheus metrics, computed at scrape time from the database.

The database is the source of truth for every run, so the numbers come from a few aggregate
queries when Prometheus asks, and nothing is counted in the runtime's hot path: a worker that
crashes loses no increment, every web process reports the same values, and no metric write
ever competes with a checkpoint. Each query reads an index (see Run.Meta.indexes and
AuditRecord.Meta.indexes); the costs are in docs/operations.md.

Counters (`*_total`) are counts of audit records of one kind, which only ever grow (the log
is append-only), so Prometheus' rate() over them is the rate of retries, unknown outcomes...
Drill runs are left out of every figure (a drill breaks runs on purpose): runs by their
`drill` column, their steps and records by runs.models.OF_REAL_WORK.
The step duration histogram is a gauge histogram: the distribution of the durations of steps
that finished within the last METRICS_STEP_WINDOW_SECONDS, read it with histogram_quantile()
directly (no rate()).
"""

import logging
from collections import Counter
from datetime import timedelta
from itertools import accumulate

from django.apps import apps
from django.conf import settings
from django.db.models import (
    Case,
    Count,
    DurationField,
    ExpressionWrapper,
    F,
    IntegerField,
    Min,
    Q,
    Sum,
    Value,
    When,
)
from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeHistogramMetricFamily,
    GaugeMetricFamily,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from archive.selectors import removed_audit_actions
from audit import checkpoints
from audit.actions import AuditAction
from audit.models import AuditRecord
from runs import store
from runs.definitions.definition import registry as workflows
from runs.models import (
    ATTENTION_RUN_STATUSES,
    FINAL_RUN_STATUSES,
    HELD_RUN_STATUSES,
    OF_REAL_WORK,
    AttentionReason,
    Run,
    RunStatus,
    ScheduleState,
    Step,
    StepStatus,
)
from runs.waiting import schedules

from .agent_metrics import agent_counts, agent_families
from .dispatch_metrics import dispatch_families
from .event_metrics import event_families, expired_events
from .history_counts import FINISH_MARGIN, OPEN_STATUSES, HistoryCount

logger = logging.getLogger(__name__)

DUE_STATUSES = (RunStatus.WAITING, RunStatus.COMPENSATING)

# Counters derived from the audit log: metric name -> (help, audit action).
AUDIT_COUNTERS = {
    "durable_step_retries": ("Retries scheduled after a transient error (audit "
                             "'retry_scheduled' records).", AuditAction.RETRY_SCHEDULED),
    "durable_unknown_outcomes": ("Step calls whose outcome was unknown (audit "
                                 "'outcome_unknown' records).", AuditAction.OUTCOME_UNKNOWN),
    "durable_lease_expiries": ("Runs taken back from a worker whose lease expired (audit "
                               "'lease_expired' records).", AuditAction.LEASE_EXPIRED),
    "durable_model_output_rejections": ("Model outputs that failed their schema (audit "
                                        "'model_output_rejected' records).",
                                        AuditAction.MODEL_OUTPUT_REJECTED),
    "durable_late_results": ("Results that arrived after the worker's lease was taken over "
                             "(audit 'late_result' records).", AuditAction.LATE_RESULT),
}

# Seconds. Reads and model calls take well under a second, writes a few, approvals hours.
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 6 * 3600,
                    24 * 3600)


def _seconds(delta) -> float:
    if delta is None:
        return 0.0
    if isinstance(delta, timedelta):
        return delta.total_seconds()
    return float(delta) / 1_000_000  # a database that returns microseconds


def _by_workflow_and_status(runs) -> Counter:
    # COUNT(*), not COUNT(id): the open runs are then counted from run_open_work_idx alone.
    return Counter({(r["workflow_name"], r["status"]): r["n"] for r in
                    runs.values("workflow_name", "status").annotate(n=Count("*")).order_by()})


def _open_runs() -> Counter:
    """{(workflow, status, attention_reason): n} of the open runs, in one read of
    run_open_work_idx, which holds exactly these columns for exactly these runs (drill runs
    left out, as from every figure here: a drill breaks runs on purpose): durable_runs
    and durable_runs_attention are both sums of it (one pass over the ~40,000 open runs of
    a million-run table instead of two). Grouped in the index's column order, the counts
    stream out of the index in order: no hashing or sorting of the rows (4 ms, not 11)."""
    return Counter({(r["workflow_name"], r["status"], r["attention_reason"]): r["n"]
                    for r in Run.objects.filter(status__in=OPEN_STATUSES, drill=False)
                    .values("status", "workflow_name", "attention_reason")
                    .annotate(n=Count("*")).order_by()})


def _finished_runs(**updated) -> Counter:
    return _by_workflow_and_status(Run.objects.filter(status__in=FINAL_RUN_STATUSES,
                                                      drill=False, **updated))


# How many runs finished (completed, compensated, terminated), by workflow and status.
# Finished runs are nearly all of the table and only grow; counting them read all of it (313
# ms at a million runs). A run's updated_at is the time its status last changed, so the runs
# that finished before the split are recounted only when due, those after it at every scrape
# along run_status_updated_idx. A finished run that leaves the table or its final status
# (reopened, archived) stays in the count until the next recount.
finished_runs = HistoryCount(
    count_before=lambda horizon: _finished_runs(updated_at__lte=horizon),
    count_after=lambda horizon: _finished_runs(updated_at__gt=horizon))


def _audit_counted(**ids) -> Counter:
    return _by_action(AuditRecord.objects.filter(
        OF_REAL_WORK, action__in=[action for _, action in AUDIT_COUNTERS.values()], **ids))


def _audit_mark(now) -> int:
    # The newest record older than FINISH_MARGIN, found walking the primary key down from
    # the newest record: the last minute's.
    return (AuditRecord.objects.filter(created_at__lte=now - FINISH_MARGIN)
            .order_by("-id").values_list("id", flat=True).first()) or 0


def _audit_before(mark) -> Counter:
    before = _audit_counted(id__lte=mark)
    if apps.is_installed("archive"):
        before.update(removed_audit_actions())
    return before


def _by_action(records) -> Counter:
    return Counter(dict(records.values_list("action").annotate(n=Count("*")).order_by()))


# The audit counters (records of the actions in AUDIT_COUNTERS). The log is append-only and
# its ids grow with time, so it splits at a mark, the newest record older than FINISH_MARGIN
# at the recount: records up to it are recounted only when due, those after it at every
# scrape along audit_uncommon_action_idx (action, id; the counted actions are not routine
# ones, audit.actions.ROUTINE_ACTIONS). Archival removes old records (all below the mark)
# and counts what each removal took (archive.ArchiveRemoval.audit_actions); the recount adds
# those counts, read in the scrape's one snapshot with the records left, so a counter never
# goes down. A removal after the recount leaves its records in the recounted figure until
# the next one.
audit_counts = HistoryCount(split_at=_audit_mark, count_before=_audit_before,
                            count_after=lambda mark: _audit_counted(id__gt=mark))


def recount_history() -> None:
    """Count the finished runs and the past audit records in full at the next scrape."""
    finished_runs.forget()
    audit_counts.forget()
    agent_counts.forget()
    expired_events.forget()


class RuntimeCollector(Collector):
    """Collects the runtime's metrics at scrape time; yields `durable_metrics_up 0` (and
    nothing else) when the database cannot be read, so an alert can say so."""

    def collect(self):
        up = GaugeMetricFamily("durable_metrics_up",
                               "1 if the last scrape could read the database, else 0.")
        try:
            # One snapshot for every figure, so records an archival removal takes away are
            # either still counted or in its counts, never both or neither; its aggregates
            # read index ranges (runs.store: fast_aggregates). Inside a caller's
            # transaction (a test's) the snapshot is the caller's.
            # Ages and "past due" are judged by the database's clock, which stamped the
            # leases, wake-up and due times: by the scraping host's, one running ahead would
            # count every live lease as stuck and raise the sweeper lag and overdue alerts.
            now = store.current().now()
            with store.current().snapshot(fast_aggregates=True):
                families = list(self._families(now))
        except Exception:
            logger.exception("metrics: reading the database failed")
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self, now):
        names = set(workflows.names())
        open_runs = _open_runs()
        yield from self._runs(now, names, open_runs)
        yield from self._attention(names, open_runs)
        yield from self._stuck(now, names)
        yield from self._lag(now)
        yield from self._audit_counters(now)
        yield self._step_durations(now)
        yield from agent_families(now, names, {name for name, _, _ in open_runs})
        yield from dispatch_families(now, names)
        yield self._schedules_failing()
        yield _checkpoint_age(now)
        if apps.is_installed("archive"):
            yield _archive_overdue(now)
        yield from event_families(now)
        if apps.is_installed("approvals"):
            yield from self._approvals(now)
        # Apps above this one (the API) bring their own families: their AppConfig.ready()
        # sets `metric_families`, a function of the time, so nothing here imports them.
        for config in apps.get_app_configs():
            families = getattr(config, "metric_families", None)
            if families is not None:
                yield from families(now)

    def _runs(self, now, names, open_runs: Counter):
        runs = GaugeMetricFamily("durable_runs", "Runs by workflow and status.",
                                 labels=["workflow", "status"])
        counts = Counter()
        for (name, status, _), n in open_runs.items():
            counts[(name, status)] += n
        counts.update(finished_runs.counts(now))
        # Every registered workflow has a series for every status, zeros included, so that
        # a rule over one status never sees a missing series as "no problem".
        for name in sorted(names | {w for w, _ in counts}):
            for status in RunStatus:
                runs.add_metric([name, status.value], counts.get((name, status.value), 0))
        yield runs

    def _attention(self, names, open_runs: Counter):
        family = GaugeMetricFamily(
            "durable_runs_attention",
            "Runs waiting for a person (attention or compensation_failed) by workflow and "
            "reason.", labels=["workflow", "reason"])
        counts = Counter()
        for (name, status, reason), n in open_runs.items():
            if status in ATTENTION_RUN_STATUSES:
                counts[(name, reason)] += n
        for name in sorted(names | {w for w, _ in counts}):
            for reason in AttentionReason:
                family.add_metric([name, reason.value], counts.pop((name, reason.value), 0))
        for (name, reason), n in sorted(counts.items()):  # a reason this code does not know
            family.add_metric([name, reason or "unspecified"], n)
        yield family

    def _stuck(self, now, names):
        family = GaugeMetricFamily(
            "durable_steps_stuck_past_lease",
            "Runs whose worker's lease expired while a step (or compensation) was in flight "
            "and that the sweeper has not taken back yet.", labels=["workflow"])
        counts = dict(Run.objects.filter(status__in=HELD_RUN_STATUSES, lease_expires_at__lt=now,
                                         drill=False)
                      .values_list("workflow_name").annotate(n=Count("id")).order_by())
        for name in sorted(names | set(counts)):
            family.add_metric([name], counts.get(name, 0))
        yield family

    def _lag(self, now):
        # Drill runs are the drill's to advance, never the sweeper's: not its lag.
        due = Run.objects.filter(status__in=DUE_STATUSES, next_wake_at__lte=now,
                                 drill=False).aggregate(
            n=Count("id"), oldest=Min("next_wake_at"))
        lag = GaugeMetricFamily(
            "durable_sweeper_lag_seconds",
            "Age of the oldest waiting run whose wake-up time has passed (0 if none is due).")
        lag.add_metric([], (now - due["oldest"]).total_seconds() if due["oldest"] else 0)
        yield lag
        count = GaugeMetricFamily("durable_runs_due",
                                  "Waiting runs whose wake-up time has passed.")
        count.add_metric([], due["n"])
        yield count
        queued = Run.objects.filter(status=RunStatus.QUEUED, drill=False).aggregate(
            oldest=Min("updated_at"))
        oldest = GaugeMetricFamily(
            "durable_queued_oldest_seconds",
            "How long the oldest queued run has waited for a worker (0 if none is queued).")
        oldest.add_metric([], (now - queued["oldest"]).total_seconds()
                          if queued["oldest"] else 0)
        yield oldest

    def _audit_counters(self, now):
        counts = audit_counts.counts(now)
        for name, (help_text, action) in AUDIT_COUNTERS.items():
            family = CounterMetricFamily(name, help_text)
            family.add_metric([], counts.get(action, 0))
            yield family

    def _step_durations(self, now):
        window = settings.METRICS_STEP_WINDOW_SECONDS
        family = GaugeHistogramMetricFamily(
            "durable_step_duration_seconds",
            f"Durations (first attempt to success, retries included) of the steps that "
            f"finished in the last {window:g} seconds, by workflow and step kind.",
            labels=["workflow", "kind"])
        cutoff = now - timedelta(seconds=window)
        duration = ExpressionWrapper(F("finished_at") - F("started_at"),
                                     output_field=DurationField())
        # Each step is counted in its own bucket (the first bound its duration is within),
        # the cumulative le counts summed here: the database aggregates two values per step
        # instead of sixteen (a third of the query's time at a thousand steps a minute).
        bucket = Case(*[When(duration__lte=timedelta(seconds=b), then=Value(i))
                        for i, b in enumerate(DURATION_BUCKETS)],
                      default=Value(len(DURATION_BUCKETS)), output_field=IntegerField())
        # Recent steps are found through their runs' status change time (an index); a
        # step of a run that has stayed in one status for the whole window is not counted.
        rows = (Step.objects.filter(OF_REAL_WORK, run__updated_at__gte=cutoff,
                                    finished_at__gte=cutoff, started_at__isnull=False,
                                    status=StepStatus.SUCCEEDED)
                .annotate(duration=duration, bucket=bucket)
                .values("run__workflow_name", "kind", "bucket")
                .annotate(n=Count("id"), seconds=Sum("duration")).order_by())
        counts, seconds = {}, Counter()
        for row in rows:
            key = (row["run__workflow_name"], row["kind"])
            counts.setdefault(key, [0] * (len(DURATION_BUCKETS) + 1))[row["bucket"]] += row["n"]
            seconds[key] += _seconds(row["seconds"])
        for key in sorted(counts):
            cumulative = list(accumulate(counts[key]))
            buckets = [(floatToGoString(b), cumulative[i])
                       for i, b in enumerate(DURATION_BUCKETS)]
            buckets.append(("+Inf", cumulative[-1]))
            family.add_metric(list(key), buckets, gsum_value=seconds[key])
        return family

    def _schedules_failing(self):
        family = GaugeMetricFamily(
            "durable_schedule_failing",
            "1 while a schedule's ticks fail (its input raises, or every slot it had to start "
            "was refused) and none has started a run since, or while its last slot handled "
            "lies ahead of the clock; 0 while it is paused.", labels=["workflow", "schedule"])
        # A paused schedule does not run, so it does not alert; its trouble stays on its row
        # to be shown, and its resume clears it (runs.waiting.schedule_health).
        failing = set(ScheduleState.objects.filter(failing_since__isnull=False, paused=False)
                      .values_list("workflow_name", "name"))
        # A series for every declared schedule, 0 when healthy: a rule never reads a missing
        # series as "no problem".
        for schedule in schedules.registry.all():
            key = (schedule.workflow_name, schedule.name)
            family.add_metric(list(key), 1 if key in failing else 0)
        return family

    def _approvals(self, now):
        from approvals.models import (
            OF_REAL_WORK_REQUESTS,
            ApprovalRequest,
            Notification,
            NotificationStatus,
            RequestStatus,
        )

        pending = ApprovalRequest.objects.filter(
            OF_REAL_WORK_REQUESTS, status=RequestStatus.PENDING).aggregate(
            n=Count("id"), overdue=Count("id", filter=Q(due_at__lte=now)))
        family = GaugeMetricFamily("durable_approvals_pending",
                                   "Approval requests waiting for a decision.")
        family.add_metric([], pending["n"])
        yield family
        family = GaugeMetricFamily(
            "durable_approvals_overdue",
            "Pending approval requests past their due time (the timeout policy is late).")
        family.add_metric([], pending["overdue"])
        yield family
        yield _unasked_waits(now)
        # The approvals' notifications are this project's outbox.
        # Backlog and failures in one read (the failed ones have no index of their own).
        pending = Q(status=NotificationStatus.PENDING)
        backlog = (Notification.objects
                   .filter(status__in=[NotificationStatus.PENDING, NotificationStatus.FAILED])
                   .aggregate(n=Count("id", filter=pending),
                              oldest=Min("created_at", filter=pending),
                              failed=Count("id", filter=Q(status=NotificationStatus.FAILED))))
        family = GaugeMetricFamily("durable_outbox_backlog",
                                   "Outbox messages (approval notifications) not delivered "
                                   "yet.")
        family.add_metric([], backlog["n"])
        yield family
        family = GaugeMetricFamily(
            "durable_outbox_oldest_seconds",
            "Age of the oldest undelivered outbox message (0 if none).")
        family.add_metric([], (now - backlog["oldest"]).total_seconds()
                          if backlog["oldest"] else 0)
        yield family
        family = GaugeMetricFamily("durable_outbox_failed",
                                   "Outbox messages given up after their last attempt.")
        family.add_metric([], backlog["failed"])
        yield family


def _checkpoint_age(now):
    # Evidence kept outside the database stops being taken when beat or its worker stops,
    # or the checkpoint storage refuses: nothing else says so. With none stored yet, the
    # age runs from the oldest record the checkpoints would have covered.
    family = GaugeMetricFamily(
        "durable_audit_checkpoint_age_seconds",
        "Age of the newest audit checkpoint stored outside the database; with none, of the "
        "oldest audit record (0 with no record, or with AUDIT_CHECKPOINT_INTERVAL_SECONDS=0).")
    since = None
    if settings.AUDIT_CHECKPOINT_INTERVAL_SECONDS:
        since = checkpoints.last_taken_at() or AuditRecord.objects.order_by("pk").values_list(
            "created_at", flat=True).first()
    family.add_metric([], max((now - since).total_seconds(), 0) if since else 0)
    return family


def _archive_overdue(now):
    from archive.archiving import overdue_seconds

    family = GaugeMetricFamily(
        "durable_archive_overdue_seconds",
        "How long past its retention the first finished run due for archiving has stayed in "
        "the hot tables (0 if none is due).")
    family.add_metric([], overdue_seconds(now))
    return family


def _unasked_waits(now):
    # A decision a run waits on that nobody has been asked for: the sweep asks within a pass,
    # so an age past that is a wait it cannot ask (reported in its log only) or one whose
    # request keeps failing to open (held for a person once it has lasted).
    from approvals.waits import unasked
    from runs.models import ApprovalWait

    # A drill's waits are the drill's to ask, in no figure (OF_REAL_WORK).
    oldest = ApprovalWait.objects.filter(OF_REAL_WORK, unasked()).aggregate(
        at=Min("created_at"))["at"]
    family = GaugeMetricFamily(
        "durable_approval_waits_unasked_oldest_seconds",
        "Age of the oldest approval a run waits on that no request asks anyone for "
        "(0 if none).")
    family.add_metric([], max((now - oldest).total_seconds(), 0) if oldest else 0)
    return family


registry = CollectorRegistry(auto_describe=False)
registry.register(RuntimeCollector())
