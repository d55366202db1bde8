"""The metrics of kept events (runs.waiting.kept): how many wait for their run now, and how
many expired before any run took them (runs.waiting.kept_expiry), a count that only grows
(rows are never deleted), for rate() and for an alert on events lost to their keep time."""

from collections import Counter

from django.db.models import Count
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from runs.models import ExternalEvent
from runs.world_models import UNSETTLED

from .history_counts import HistoryCount

EXPIRED = "expired"


def _expired(**when) -> Counter:
    return Counter({EXPIRED: ExternalEvent.objects.filter(**when).aggregate(n=Count("*"))["n"]})


# Expired events by when they expired: those before the split recounted only when due, those
# after it at every scrape, along external_event_expired_idx.
expired_events = HistoryCount(count_before=lambda split: _expired(expired_at__lte=split),
                              count_after=lambda split: _expired(expired_at__gt=split))


def event_families(now):
    kept = GaugeMetricFamily(
        "durable_events_kept",
        "External events kept for a run that does not wait for them yet (refused ones "
        "included), within their keep time or not yet marked expired.")
    # Along external_event_kept_order_idx, which holds exactly these rows.
    kept.add_metric([], ExternalEvent.objects.filter(UNSETTLED).aggregate(n=Count("*"))["n"])
    yield kept
    expired = CounterMetricFamily(
        "durable_events_expired",
        "Kept external events that expired (RUNS_EVENT_KEEP_SECONDS) before any run took "
        "them; never delivered.")
    expired.add_metric([], expired_events.counts(now)[EXPIRED])
    yield expired
