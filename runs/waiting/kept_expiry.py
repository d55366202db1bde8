"""How long a kept event is kept: an event that came before any run waited for it is kept
for RUNS_EVENT_KEEP_SECONDS (seven days by default) from when it came, by the database's
clock (keep_until, written as it is kept), and then expires. An expired event is never
delivered, by no path: not to a run that begins to wait (runs.waiting.kept), not by the
sweeper's pass, not settled by a person's delivery or skip (transitions.events). Otherwise
an event for a wait no run ever reaches would stay kept for ever, looked at by every pass,
and be taken months later by a run that happens to wait under the same key.

Whoever meets a kept event past its time marks it expired (expired_at), once, under a
condition that a delivery cannot cross (the row is neither consumed nor expired, and its
time has passed): the sweeper's pass (expire_kept_events, ahead of its pass over the kept
rows), or a run beginning to wait that finds it first. The one that marks it says so once at
WARNING, naming the event and its key, never its payload (which may hold sensitive data).
The metric durable_events_expired_total counts them (observability.event_metrics). An event
delivered before its time is never expired; one refused for its run expires as any other
(its refusal stays on the run's log), and leaves the pass.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F

from ..machine.transitions.kernel import transition_time
from ..models import ExternalEvent
from ..world_models import UNSETTLED

logger = logging.getLogger(__name__)

# Kept events expired per transaction, and per pass of the sweeper (the next pass goes on).
EXPIRE_BATCH = 100
EXPIRE_PASS_ROWS = 1000


def keep_time() -> timedelta:
    """How long an event no run waits for yet is kept (RUNS_EVENT_KEEP_SECONDS)."""
    return timedelta(seconds=settings.RUNS_EVENT_KEEP_SECONDS)


def past_its_time(kept: ExternalEvent, now: datetime) -> bool:
    """Whether `kept` has outlived its keep time at `now` (the database's clock). A row an
    older release kept without keep_until is given one by the sweeper's pass; until then it
    is kept."""
    return kept.keep_until is not None and kept.keep_until <= now


def expire_kept(kept: ExternalEvent, *, now: datetime | None = None) -> bool:
    """Mark `kept` expired if it is past its time, and say so once. Returns whether this call
    marked it (False: not past its time, or consumed or marked meanwhile)."""
    when = transition_time(now)
    marked = ExternalEvent.objects.filter(
        UNSETTLED, pk=kept.pk, keep_until__lte=when).update(expired_at=when)
    if marked:
        kept.expired_at = when
        said_expired(kept)
    return bool(marked)


def said_expired(kept: ExternalEvent) -> None:
    logger.warning("kept event %s (%s:%s) expired: no run took the event %s for the key %r "
                   "before %s; it will never be delivered", kept.pk, kept.source,
                   kept.event_id, kept.event_name, kept.correlation_key,
                   f"{kept.keep_until:%Y-%m-%d %H:%M:%S %Z}")


def expire_kept_events(*, now: datetime | None = None, batch: int = EXPIRE_BATCH,
                       rows: int = EXPIRE_PASS_ROWS) -> int:
    """The sweeper's pass, ahead of its pass over the kept rows: kept events past their time
    are marked expired, up to `rows` of them, soonest first, along
    external_event_keep_until_idx (so a pass costs what is due, not what is kept). Rows an
    older release kept without keep_until are given theirs first. Returns how many expired."""
    when = transition_time(now)
    _stamp_unstamped(batch)
    expired = 0
    while expired < rows:
        asked = min(batch, rows - expired)
        found = _expire_batch(when, asked)
        expired += found
        if found < asked:
            break
    return expired


def _stamp_unstamped(batch: int) -> None:
    """keep_until for the first `batch` kept rows lacking it: written by the previous release
    while migration runs 0047 ran (which stamped the rows before it). From when they came."""
    unstamped = list(ExternalEvent.objects.filter(UNSETTLED, keep_until__isnull=True)
                     .values_list("pk", flat=True)[:batch])
    if unstamped:
        ExternalEvent.objects.filter(pk__in=unstamped, keep_until__isnull=True).update(
            keep_until=F("received_at") + keep_time())


def _expire_batch(when: datetime, batch: int) -> int:
    # Locked, and skipped if locked: a row a delivery holds is that delivery's (it then finds
    # it consumed, or this pass finds it consumed); the marks and their lines are one for one.
    with transaction.atomic():
        due = list(ExternalEvent.objects.select_for_update(skip_locked=True).filter(
            UNSETTLED, keep_until__lte=when,
        ).order_by("keep_until").only(
            "pk", "source", "event_id", "event_name", "correlation_key", "keep_until",
        )[:batch])
        ExternalEvent.objects.filter(pk__in=[kept.pk for kept in due]).update(expired_at=when)
    for kept in due:
        said_expired(kept)
    return len(due)
