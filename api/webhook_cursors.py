"""Subscriber cursors: the run events written by the runtime's transitions for each status
change, and the audit records of step outcomes (the one record each effect writes), become
one WebhookDelivery per subscriber, each queued once, in the order written. Each subscriber
has a cursor on each kind of row (CursorState); a pass moves it over what is new and never
past a row that may still commit. Sending the deliveries is api.webhooks'.
"""

import heapq
import logging
import uuid
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Case, Max, Q, QuerySet, Value, When

from audit.actions import STEP_OUTCOMES
from audit.models import AuditRecord
from runs import store
from runs.models import OF_REAL_WORK, RunEvent

from .models import WebhookDelivery, WebhookSubscriber

logger = logging.getLogger(__name__)


def cursors_at_head() -> dict[str, int]:
    """Where a subscriber registered now starts: after every status change and step outcome
    written so far. It is told what happens from its registration on, not the whole history
    (millions of deliveries on a busy database), and never a step outcome twice: outcomes
    written before they were read from the audit chain exist both as events and as records."""
    return {"last_event_id": RunEvent.objects.aggregate(head=Max("pk"))["head"] or 0,
            "last_record_id": AuditRecord.objects.aggregate(head=Max("pk"))["head"] or 0}


# Ids are drawn when a row is inserted, not when it commits: a transition that commits after
# a later one leaves a hole, its id missing below ids already visible, and a cursor moved
# past the hole would never read its row. A rolled-back transaction leaves a hole for good.
# So a cursor passes a hole only once no transaction that may have drawn the id is still
# open, as PostgreSQL's transactions say (CursorState's holes), never after a time: a
# transaction that stalls for an hour holds the cursor for that hour, and its row is
# delivered once it commits. The price: any transaction that has written and is open since
# before the hole was judged holds the cursor too, whatever it touches, on any database of
# the server (transaction ids are the server's). Deliveries do not wait with it: each cursor
# has a second position, where its rows are queued through (CursorState.through), and a
# pass reads on from there, and reads again only the missing ids below it, however far the
# cursor is behind.
#
# A transaction is given its transaction id when it first writes, in the INSERT that drew
# the id, microseconds later: the horizon that stands above all of theirs is taken no
# sooner than this long after the missing ids were seen.
HOLE_MIN_AGE = timedelta(seconds=5)
# Ids looked at per cursor and pass after where its rows are queued through (numbers and
# dates along the primary key).
SCAN = 10_000
# Holes (runs of missing ids) a cursor keeps between it and where its rows are queued
# through, each read again on every pass until it fills or is passed. Past that many, the
# rows after the last one wait with the cursor, and a pass's reads stay bounded.
HOLES_KEPT = 1000


# The rows each cursor moves along.
MODELS = {"event": RunEvent, "record": AuditRecord}


def news_for(subscriber: WebhookSubscriber) -> tuple[QuerySet, QuerySet]:
    """(status changes, step outcomes) that `subscriber` is told of, wherever its cursors
    stand: the publisher queues these (judging the rows it reads by `news` and `takes`),
    and archiving (api.archival) keeps a run hot until they are delivered."""
    events = RunEvent.objects.filter(news("event"))
    records = AuditRecord.objects.filter(news("record"))
    return (events.filter(taken(subscriber.workflows, "run__workflow_name")),
            records.filter(taken(subscriber.workflows, "run__workflow_name")))


def news(kind: str) -> Q:
    """The rows of `kind` that a subscriber of every workflow is told of."""
    # A drill run's changes are no news of real work (a drill breaks runs on purpose).
    if kind == "event":
        return OF_REAL_WORK
    return OF_REAL_WORK & Q(action__in=[str(a) for a in STEP_OUTCOMES]) & ~Q(step_name="")


def takes(workflows: list[str], workflow_name: str) -> bool:
    """Whether a subscriber of `workflows` (none: every one) takes `workflow_name`."""
    return not workflows or workflow_name in workflows


def taken(workflows: list[str], workflow_name: str) -> Q:
    """`takes` as a query's condition on the rows whose workflow's name is the field
    `workflow_name`: a query reads past the rows a subscriber does not take."""
    return Q(**{f"{workflow_name}__in": workflows}) if workflows else Q()


@dataclass(frozen=True)
class CursorState:
    """Where one of a subscriber's cursors stands, stored on its subscriber in the columns of
    its kind ("event": status changes, "record": step outcomes).

    How far its rows are read. Every row up to `cursor` is final: queued, no news to the
    subscriber, or missing for good. Every row up to `through` has been read, and queued or
    judged no news, save the ids of `missing`, which were missing when last read (holes,
    each a (first, last) run of ids, ascending): a pass reads on after `through`, and reads
    again only `missing` to see which filled. So its reads follow what is new and the holes,
    not how far the cursor is behind. The cursor stops below the first hole that may still
    fill; `through` goes on past it. Rows are judged with the subscriber's workflows of the
    pass that read them: widened, it is told of rows read from then on.

    What it knows of the holes after it. Every id up to `holes_upto` was drawn before
    `holes_seen_at`, so by a transaction that had its transaction id HOLE_MIN_AGE later.
    `horizon` is a transaction id given to the publisher after that, so above each of
    theirs: once no transaction below it is open, an id up to `holes_upto` still missing
    stays missing (rolled back, or its row deleted), and the cursor passes it."""

    cursor: int
    through: int
    missing: tuple[tuple[int, int], ...] = ()
    holes_upto: int | None = None
    holes_seen_at: datetime | None = None
    horizon: int | None = None
    # A horizon is to be taken in the transaction that stores this state.
    wants_horizon: bool = False

    @classmethod
    def of(cls, subscriber: WebhookSubscriber, kind: str) -> "CursorState":
        cursor = getattr(subscriber, f"last_{kind}_id")
        # None: read through the cursor. Never behind it: a cursor set by other means (at
        # registration, cursors_at_head) starts both.
        through = max(cursor, getattr(subscriber, f"{kind}_queued_through") or cursor)
        missing = tuple((max(first, cursor + 1), last) for first, last
                        in getattr(subscriber, f"{kind}_holes_missing") or ()
                        if cursor < last <= through)
        return cls(cursor, through, missing,
                   holes_upto=getattr(subscriber, f"{kind}_holes_upto"),
                   holes_seen_at=getattr(subscriber, f"{kind}_holes_seen_at"),
                   horizon=getattr(subscriber, f"{kind}_holes_horizon"))

    def fields(self, kind: str) -> dict:
        return {f"last_{kind}_id": self.cursor,
                f"{kind}_queued_through": self.through if self.through > self.cursor else None,
                f"{kind}_holes_missing": [list(run) for run in self.missing] or None,
                f"{kind}_holes_upto": self.holes_upto,
                f"{kind}_holes_seen_at": self.holes_seen_at,
                f"{kind}_holes_horizon": self.horizon}

    def with_holes(self, *, upto: int | None = None,
                   seen_at: datetime | None = None) -> "CursorState":
        """This state with the holes seen up to `upto` at `seen_at`, no horizon taken yet
        (None: no hole waits)."""
        return replace(self, holes_upto=upto, holes_seen_at=seen_at, horizon=None,
                       wants_horizon=False)


@dataclass(frozen=True)
class OpenTransactions:
    """PostgreSQL's transactions as a pass finds them, before it reads any row."""

    # The oldest transaction id of another session still open: every transaction below it
    # has committed or rolled back. When none is open, the next id to be given.
    oldest: int
    # Whether this session had no transaction id yet: one it is given during the pass is
    # newer than every id given before the pass began, so it may serve as a horizon.
    fresh: bool


def open_transactions() -> OpenTransactions | None:
    """The transactions open now, as the store tells them; None on a database with one
    writer at a time (SQLite, the demo's), where every hole is final."""
    found = store.current().open_transactions()
    return None if found is None else OpenTransactions(*found)


def queue_deliveries(*, now: datetime | None = None, limit: int = 1000) -> int:
    """Turn new status changes and step outcomes into deliveries, per subscriber, each in
    the order it was written, at most `limit` of each kind a pass. Two cursors per
    subscriber, each with where its rows are queued through (CursorState.through), read by
    primary key from where it stopped: the cost follows what is new and the holes, not the
    size of either table nor how far a cursor waits behind; the new rows are read once for
    all subscribers (Written) and judged for each. A cursor never passes a row that may
    still commit (CursorState's holes). A hole is seen by one pass; the first pass
    HOLE_MIN_AGE later takes its horizon; a later one passes it once every transaction open
    when the horizon was taken has ended, and it is still missing. The rows after a hole are
    queued meanwhile, however many. Run in a transaction of its own (the publisher is):
    inside a caller's transaction that had written before, no horizon can be taken, and a
    hole is waited at until it commits."""
    # Holes are aged by the database's clock, the same for every worker; read when asked,
    # as a hole is seen after the rows above it were read.
    given = now

    def clock() -> datetime:
        return given or store.current().now()

    # Queued due at once by the same clock the sender judges due times by.
    now = now or clock()
    # Before any row is read: a transaction found ended here has its row, if it committed,
    # in what the pass reads next.
    transactions = open_transactions()
    cursors = [(subscriber, {kind: CursorState.of(subscriber, kind) for kind in MODELS})
               for subscriber in WebhookSubscriber.objects.filter(active=True)]
    # The rows after where the cursors' rows are queued through, read once for them all.
    written = {kind: Written(kind, lowest=min((states[kind].through for _, states in cursors),
                                              default=0))
               for kind in MODELS}
    queued = 0
    for subscriber, states in cursors:
        (event_ids, event_state), (record_ids, record_state) = _unqueued_together(
            subscriber, states, written, transactions=transactions, clock=clock, limit=limit)
        try:
            # One subscriber's deliveries and its cursors commit together. An admin may
            # delete a subscriber with no deliveries yet while this pass reads it: its
            # deliveries would refer to nothing, and the foreign key refuses them at commit.
            with transaction.atomic():
                _queue(subscriber, event_ids, record_ids, now=now,
                       states={"event": event_state, "record": record_state},
                       fresh=transactions is not None and transactions.fresh)
        except IntegrityError:
            if WebhookSubscriber.objects.filter(pk=subscriber.pk).exists():
                raise
            logger.info("webhook subscriber %s was deleted during the pass: nothing queued "
                        "for it", subscriber.name)
            continue
        queued += len(event_ids) + len(record_ids)
    return queued


def _queue(subscriber, event_ids: list[tuple[int, datetime]],
           record_ids: list[tuple[int, datetime]], *, now: datetime,
           states: dict[str, CursorState], fresh: bool) -> None:
    if event_ids or record_ids:
        # In the order written, both kinds together: deliveries due at once are sent in the
        # order of their ids, and a subscriber must not hear that a run completed before it
        # hears of the steps that led there. On equal times (one transaction) a step's
        # outcome goes first: the status change is what it led to. The times only interleave
        # the two kinds; each kind keeps the order of its ids (both lists are in it; merge
        # takes each list's rows in their order). A row's time is taken when its transition
        # begins (or given by its caller), not when it is written: one begun first and
        # written after another has the earlier time and the higher id, and a sort by time
        # told it first.
        written = heapq.merge([(at, 0, pk) for pk, at in record_ids],
                              [(at, 1, pk) for pk, at in event_ids])
        WebhookDelivery.objects.bulk_create(
            [WebhookDelivery(subscriber=subscriber, delivery_id=uuid.uuid4(),
                             next_attempt_at=now,
                             **{"event_id" if is_event else "record_id": pk})
             for _, is_event, pk in written],
            ignore_conflicts=True)
    if any(state.wants_horizon for state in states.values()):
        # Without a fresh id (a caller's transaction had one before the pass), none is
        # taken, and the holes wait.
        # This transaction's id, given now: after the pass read the rows, so newer than the
        # id of every transaction that had one by then. Not a snapshot's xmax: that is one
        # past the newest transaction that has ended, and one still open may stand above it.
        horizon = store.current().transaction_id() if fresh else None
        states = {kind: replace(state, horizon=horizon, wants_horizon=False)
                  if state.wants_horizon else state for kind, state in states.items()}
    fields = {name: value for kind, state in states.items()
              for name, value in state.fields(kind).items()}
    if any(getattr(subscriber, name) != value for name, value in fields.items()):
        WebhookSubscriber.objects.filter(pk=subscriber.pk).update(**fields)


def _unqueued_together(subscriber, states: dict[str, CursorState], written: dict, *,
                       transactions: OpenTransactions | None, clock: Callable[[], datetime],
                       limit: int) -> tuple[tuple[list, CursorState], tuple[list, CursorState]]:
    """(rows, state) of each kind, events then records, as _unqueued gives them, the two
    kinds kept in step. A kind cut at the limit leaves rows for the next pass; the other
    kind's rows written since the first of those wait with them, so that no receiver hears
    that a run completed before the step outcomes that led there (each kind keeps its own
    order whatever the limit). The kind whose rows left over are the earlier holds the
    other; a pass queues at least one row of the kind that holds, so neither waits for
    ever."""
    def unqueued(kind: str, until: datetime | None = None):
        return _unqueued(subscriber, kind, states[kind], written[kind],
                         transactions=transactions, clock=clock, limit=limit, until=until)

    (*events, events_left), (*records, records_left) = unqueued("event"), unqueued("record")
    if records_left is not None and (events_left is None or records_left <= events_left):
        *events, _ = unqueued("event", until=records_left)
    elif events_left is not None:
        *records, _ = unqueued("record", until=events_left)
    return tuple(events), tuple(records)


def _unqueued(subscriber, kind: str, state: CursorState, written: "Written", *,
              transactions: OpenTransactions | None, clock: Callable[[], datetime],
              limit: int, until: datetime | None = None
              ) -> tuple[list[tuple[int, datetime]], CursorState, datetime | None]:
    """((id, time written) of the rows of `kind` the subscriber is told of (news_for) and
    has no delivery of yet, up to `limit`: first those that filled a hole below
    `state.through`, then those after it; the cursor's state after them, its holes as this
    pass judged them). The cursor moves over every row written, news or not, up to the first
    hole that may still fill; the rows beyond it are queued all the same, and only the holes
    are read again. With `until`, the rows from the first written at or after it on wait
    for the next pass. Last, the time of the first row the subscriber is told of that the
    limit left for the next pass, or None."""
    # The holes below `through`: the rows that filled them since they were last read.
    filled = (list(_rows(kind).filter(_among(state.missing))[:limit]) if state.missing
              else [])
    # Past the last row read, a hole's ids were not read again: none is known missing.
    read_to = filled[-1][0] if len(filled) == limit else None
    missing = _without(state.missing, (row[0] for row in filled))
    new = written.after(state.through)
    new_holes = _holes_in(state.through, [row[0] for row in new])
    # At most HOLES_KEPT holes are kept: the rows from the first one over on wait, as they
    # would behind the cursor, for a pass that keeps fewer.
    kept = max(HOLES_KEPT - len(missing), 0)
    bound = new[-1][0] if new else state.through
    if len(new_holes) > kept:
        bound = new_holes[kept][0] - 1
    if until is not None and (held := next((row[0] for row in new
                                            if row[0] <= bound and row[1] >= until), None)):
        bound = held - 1
    told = _unqueued_news(subscriber, kind, filled + [row for row in new if row[0] <= bound])
    queued = [row for row in told if row[0] <= state.through]
    room = limit - len(queued)
    if room <= 0 or bound == state.through:
        through = state.through
    else:
        after = [row for row in told if row[0] > state.through][:room]
        # Cut at the limit: the rest are read again next pass.
        through = after[-1][0] if len(after) == room else bound
        queued += after
        missing += tuple(hole for hole in new_holes if hole[0] <= through)
    # Ids up to here that are missing stay missing.
    if transactions is None:
        final = through
    elif state.horizon is not None and transactions.oldest > state.horizon:
        final = state.holes_upto
    else:
        final = state.cursor
    if read_to is not None:
        final = min(final, read_to)
    missing = tuple((max(first, final + 1), last) for first, last in missing if last > final)
    cursor = missing[0][0] - 1 if missing else through
    left = min((at for pk, at in told if pk > through), default=None)
    return queued, _judged(replace(state, cursor=cursor, through=through, missing=missing),
                           transactions, clock=clock), left


def _rows(kind: str) -> QuerySet:
    """The rows of `kind` by id, each as (id, time written, whether a subscriber of every
    workflow is told of it, its run's workflow): what judging it for any subscriber needs."""
    return (MODELS[kind].objects.order_by("pk")
            .annotate(is_news=Case(When(news(kind), then=Value(True)), default=Value(False)))
            .values_list("pk", "created_at", "is_news", "run__workflow_name"))


class Written:
    """The rows of one kind a pass reads after where its cursors' rows are queued through,
    the first SCAN after each cursor's: read once, from the lowest of them (`lowest`), for
    every cursor whose first SCAN rows that read holds. It holds them all when fewer than
    SCAN rows were written since, as on a pass that keeps up; a cursor further ahead of the
    lowest than that (another catching up) reads on from its own, and that read is shared
    the same way."""

    def __init__(self, kind: str, *, lowest: int):
        self.kind = kind
        self.lowest = lowest
        # Each read: where it started, and the ids and rows read after it.
        self.reads: list[tuple[int, list[int], list[tuple]]] = []

    def after(self, through: int) -> list[tuple]:
        """The first SCAN rows after `through` (a cursor's, so never below `lowest`), as
        `_rows` gives them."""
        for start, ids, rows in self.reads:
            if start <= through:
                later = rows[bisect_right(ids, through):]
                # SCAN rows after `through`, or every row after it: the read found the last.
                if len(later) >= SCAN or len(rows) < SCAN:
                    return later[:SCAN]
        # No read holds them: the first starts from the lowest cursor, a later one from
        # this cursor, and holds them.
        start = through if self.reads else self.lowest
        rows = list(_rows(self.kind).filter(pk__gt=start)[:SCAN])
        self.reads.append((start, [row[0] for row in rows], rows))
        return self.after(through)


def _unqueued_news(subscriber, kind: str, rows: list[tuple]) -> list[tuple[int, datetime]]:
    """(id, time written) of the `rows` (as `_rows` gives them) the subscriber is told of and
    has no delivery of yet, in their order. Judged by the subscriber's workflows as they are
    in this pass, as news_for would."""
    told = [(pk, at) for pk, at, is_news, workflow in rows
            if is_news and takes(subscriber.workflows, workflow)]
    if not told:
        return []
    # Those with a delivery already (queued past a hole by an earlier release, which read
    # every pass from the cursor on) are left out here, not counted against `limit`.
    queued = set(WebhookDelivery.objects.filter(
        subscriber=subscriber, **{f"{kind}_id__in": [pk for pk, _ in told]})
        .values_list(f"{kind}_id", flat=True))
    return [row for row in told if row[0] not in queued]


def _among(missing: tuple[tuple[int, int], ...]) -> Q:
    """The rows whose ids are in `missing`."""
    condition = Q()
    for first, last in missing:
        condition |= Q(pk__range=(first, last))
    return condition


def _without(missing: tuple[tuple[int, int], ...],
             found: Iterable[int]) -> tuple[tuple[int, int], ...]:
    """The runs of `missing` less the ids `found` (ascending, each within one run)."""
    runs = list(missing)
    out, index = [], 0
    for pk in found:
        while runs[index][1] < pk:
            out.append(runs[index])
            index += 1
        first, last = runs[index]
        if first < pk:
            out.append((first, pk - 1))
        if pk < last:
            runs[index] = (pk + 1, last)
        else:
            index += 1
    return tuple(out + runs[index:])


def _holes_in(after: int, ids: list[int]) -> list[tuple[int, int]]:
    """The runs of ids missing between `after` and the ascending `ids` read after it."""
    holes, previous = [], after
    for pk in ids:
        if pk > previous + 1:
            holes.append((previous + 1, pk - 1))
        previous = pk
    return holes


def _judged(state: CursorState, transactions: OpenTransactions | None, *,
            clock: Callable[[], datetime]) -> CursorState:
    """`state` as a pass moved it (its cursor, the rows read through `through`, the holes
    of `missing`, the first of which it waits at), with its holes judged by the pass."""
    if transactions is None:
        return state.with_holes()
    waits_at = state.missing[0][0] if state.missing else None
    if state.holes_upto is not None and state.cursor < state.holes_upto:
        # Still ahead of the cursor: what they say stays true, and a horizon is taken once
        # the transactions that drew the ids have their transaction ids.
        if (waits_at is not None and waits_at <= state.holes_upto and state.horizon is None
                and clock() >= state.holes_seen_at + HOLE_MIN_AGE):
            return replace(state, wants_horizon=True)
        return state
    if waits_at is None:
        return state.with_holes()
    # Now, after the rows up to `through` were read: each was drawn before.
    return state.with_holes(upto=state.through, seen_at=clock())


def unqueued_age(now: datetime) -> float:
    """Seconds since the oldest row of either kind was written that some active
    subscriber's cursor has neither queued nor passed (a row after where its rows are
    queued through), 0 if none. The rows after the lowest such point include every other
    subscriber's: one look along each kind's primary key."""
    subscribers = list(WebhookSubscriber.objects.filter(active=True))
    oldest = None
    for kind, model in MODELS.items() if subscribers else ():
        through = min(CursorState.of(subscriber, kind).through for subscriber in subscribers)
        written = (model.objects.filter(pk__gt=through).order_by("pk")
                   .values_list("created_at", flat=True).first())
        if written is not None and (oldest is None or written < oldest):
            oldest = written
    return max((now - oldest).total_seconds(), 0.0) if oldest is not None else 0.0
