"""Counts over a history that only grows (finished runs, the audit log, the turns and tool
calls of finished runs), without reading all of it at every scrape.

The history splits at a point that moves forward with time: what lies before it is counted
once per METRICS_FINISHED_RECOUNT_SECONDS (the one full read), what lies after it at every
scrape, along an index, at the cost of what happened since the recount. The split lies
FINISH_MARGIN before the recount, so nothing a transaction in flight then commits can land
behind it. Each count gives where its split lies and how each side is counted.
"""

import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings

from runs.models import FINAL_RUN_STATUSES, RunStatus

OPEN_STATUSES = sorted(set(RunStatus) - FINAL_RUN_STATUSES)
# A run finished (or a record written) this long before a recount is certainly committed.
FINISH_MARGIN = timedelta(seconds=60)


def margin_before(now: datetime) -> datetime:
    """The split of a history ordered by time: FINISH_MARGIN before the recount."""
    return now - FINISH_MARGIN


def add(before, after):
    """Two counts of one history (Counters) as one."""
    return before + after


class HistoryCount:
    """The count of one history, recounted in full only when due (see the module).

    `count_before(split)` and `count_after(split)` count each side of the split that
    `split_at(now)` gives at a recount; `combine(before, after)` makes them one count."""

    def __init__(self, *, count_before: Callable, count_after: Callable,
                 split_at: Callable = margin_before, combine: Callable = add):
        self._count_before, self._count_after = count_before, count_after
        self._split_at, self._combine = split_at, combine
        self._lock = threading.Lock()
        self._counted_at = None
        self._split = None
        self._before = None

    def counts(self, now, **after):
        """The count at `now`: the recount's (made now if due) plus what came after it
        (`after`: what count_after takes besides the split)."""
        with self._lock:
            if self._counted_at is None or now < self._counted_at or \
                    (now - self._counted_at).total_seconds() >= \
                    settings.METRICS_FINISHED_RECOUNT_SECONDS:
                split = self._split_at(now)
                self._before = self._count_before(split)
                self._counted_at, self._split = now, split
            split, before = self._split, self._before
        return self._combine(before, self._count_after(split, **after))

    def forget(self) -> None:
        """Count everything again at the next scrape."""
        with self._lock:
            self._counted_at = None
