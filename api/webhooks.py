"""Progress events to subscribers: the run events written by the runtime's transitions for
each status change, and the audit records of step outcomes (the one record each effect
writes), become one delivery per subscriber, sent with retries and backoff, each signed.

Signature: the header `X-Webhook-Signature: sha256=<hex>` is HMAC-SHA256 with the
subscriber's secret over `<X-Webhook-Timestamp>.<body>`; receivers recompute it, compare in
constant time and refuse old timestamps. `X-Webhook-Id` is the delivery id, the same on every
attempt, for deduplication. A failing endpoint only delays its own deliveries: the runtime
never waits for a subscriber, and the publisher waits at most WEBHOOK_TIMEOUT_SECONDS for
one delivery, reads no response body, and tries an endpoint that gives no answer once a pass.
"""

import asyncio
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

import httpx
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Exists, Max, OuterRef, Q, QuerySet
from django.urls import reverse
from django.utils import timezone

from approvals.notifications import public_url
from audit.access import AccessAction, record_access_change
from audit.actions import STEP_OUTCOMES
from audit.chain import Actor
from audit.models import AuditRecord
from runs import store
from runs.definitions.retry import RetryPolicy
from runs.machine.single_pass import single_pass
from runs.machine.storable import printable
from runs.models import RunEvent

from . import public_network
from .models import WebhookDelivery, WebhookSubscriber

logger = logging.getLogger(__name__)
JOB = "api.publish_webhooks"
# Backoff 2, 4, 8 ... seconds, at most an hour; given up after ten attempts.
RETRY = RetryPolicy(initial_interval=2, backoff_coefficient=2, maximum_interval=3600,
                    maximum_attempts=10, jitter=0)


@dataclass
class PublishReport:
    queued: int = 0
    delivered: int = 0
    failed: int = 0
    # Not tried because their subscriber's endpoint gave no answer earlier in the pass.
    deferred: int = 0
    # Not sent, for good: their subscriber no longer takes their run's workflow.
    withdrawn: int = 0
    # Another pass held the job's lock: this one did nothing.
    locked_out: bool = False


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """The signature header's value for `body` sent at `timestamp`."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def subscribed_workflows(value) -> list[str]:
    """A subscriber's workflows as stored: the names, sorted, once each. Raises ValueError
    for anything but a list of names: the publisher reads the value as one, and a bare name
    ("invoice-approval") would be taken as its letters, matching no run, so the subscriber
    would silently be told nothing."""
    if not isinstance(value, list) or not all(isinstance(n, str) and n.strip() for n in value):
        raise ValueError('a list of workflow names, e.g. ["invoice-approval"], or [] for '
                         "every workflow")
    return sorted(set(value))


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
# open, as PostgreSQL's transactions say (Holes), never after a time: a transaction that
# stalls for an hour holds the cursor for that hour, and its row is delivered once it
# commits. The price: any transaction that has written and is open since before the hole
# was judged holds the cursor too, whatever it touches, on any database of the server
# (transaction ids are the server's). Deliveries do not wait with it: each cursor has a
# second position, where its rows are queued through (Position), and a pass reads on from
# there, and reads again only the missing ids below it, however far the cursor is behind.
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


def news_for(subscriber: WebhookSubscriber) -> tuple[QuerySet, QuerySet]:
    """(status changes, step outcomes) that `subscriber` is told of, wherever its cursors
    stand: the publisher queues these, and archiving (api.archival) keeps a run hot until
    they are delivered."""
    # A drill run's changes are no news of real work (a drill breaks runs on purpose).
    events = RunEvent.objects.filter(run__drill=False)
    records = (AuditRecord.objects.filter(action__in=[str(a) for a in STEP_OUTCOMES],
                                          run__drill=False)
               .exclude(step_name=""))
    if subscriber.workflows:
        events = events.filter(run__workflow_name__in=subscriber.workflows)
        records = records.filter(run__workflow_name__in=subscriber.workflows)
    return events, records


@dataclass(frozen=True)
class Holes:
    """What a cursor knows of the holes after it, stored on its subscriber. Every id up to
    `upto` was drawn before `seen_at`, so by a transaction that had its transaction id
    HOLE_MIN_AGE later. `horizon` is a transaction id given to the publisher after that,
    so above each of theirs: once no transaction below it is open, an id up to `upto` still
    missing stays missing (rolled back, or its row deleted), and the cursor passes it."""

    upto: int | None = None
    seen_at: datetime | None = None
    horizon: int | None = None
    # A horizon is to be taken in the transaction that stores these.
    wants_horizon: bool = False

    @classmethod
    def of(cls, subscriber: WebhookSubscriber, kind: str) -> "Holes":
        return cls(*(getattr(subscriber, f"{kind}_holes_{name}")
                     for name in ("upto", "seen_at", "horizon")))

    def fields(self, kind: str) -> dict:
        return {f"{kind}_holes_upto": self.upto, f"{kind}_holes_seen_at": self.seen_at,
                f"{kind}_holes_horizon": self.horizon}


@dataclass(frozen=True)
class Position:
    """How far a cursor's rows are read, stored on its subscriber. Every row up to `cursor`
    is final: queued, no news to the subscriber, or missing for good. Every row up to
    `through` has been read, and queued or judged no news, save the ids of `missing`, which
    were missing when last read (holes, each a (first, last) run of ids, ascending): a pass
    reads on after `through`, and reads again only `missing` to see which filled. So its
    reads follow what is new and the holes, not how far the cursor is behind. The cursor
    stops below the first hole that may still fill; `through` goes on past it. Rows are
    judged with the subscriber's workflows of the pass that read them: widened, it is told
    of rows read from then on."""

    cursor: int
    through: int
    missing: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, subscriber: WebhookSubscriber, kind: str) -> "Position":
        cursor = getattr(subscriber, f"last_{kind}_id")
        # None: read through the cursor. Never behind it: a cursor set by other means (at
        # registration, cursors_at_head) starts both.
        through = max(cursor, getattr(subscriber, f"{kind}_queued_through") or cursor)
        missing = tuple((max(first, cursor + 1), last) for first, last
                        in getattr(subscriber, f"{kind}_holes_missing") or ()
                        if cursor < last <= through)
        return cls(cursor, through, missing)

    def fields(self, kind: str) -> dict:
        return {f"last_{kind}_id": self.cursor,
                f"{kind}_queued_through": self.through if self.through > self.cursor else None,
                f"{kind}_holes_missing": [list(run) for run in self.missing] or None}


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
    subscriber, each with where its rows are queued through (Position), read by primary key
    from where it stopped: the cost follows what is new and the holes, not the size of
    either table nor how far a cursor waits behind. A cursor never passes a row that may
    still commit (Holes). A hole is seen by one pass; the first pass HOLE_MIN_AGE later
    takes its horizon; a later one passes it once every transaction open when the horizon
    was taken has ended, and it is still missing. The rows after a hole are queued
    meanwhile, however many. Run in a transaction of its own (the publisher is): inside a
    caller's transaction that had written before, no horizon can be taken, and a hole is
    waited at until it commits."""
    # Holes are aged by the database's clock, the same for every worker; read when asked,
    # as a hole is seen after the rows above it were read.
    given = now

    def clock() -> datetime:
        return given or store.current().now()

    now = now or timezone.now()
    # Before any row is read: a transaction found ended here has its row, if it committed,
    # in what the pass reads next.
    transactions = open_transactions()
    queued = 0
    for subscriber in WebhookSubscriber.objects.filter(active=True):
        events, records = news_for(subscriber)
        event_ids, event_position, event_holes = _unqueued(
            subscriber, events, "event", Position.of(subscriber, "event"),
            Holes.of(subscriber, "event"), transactions=transactions, clock=clock,
            limit=limit)
        record_ids, record_position, record_holes = _unqueued(
            subscriber, records, "record", Position.of(subscriber, "record"),
            Holes.of(subscriber, "record"), transactions=transactions, clock=clock,
            limit=limit)
        try:
            # One subscriber's deliveries and its cursors commit together. An admin may
            # delete a subscriber with no deliveries yet while this pass reads it: its
            # deliveries would refer to nothing, and the foreign key refuses them at commit.
            with transaction.atomic():
                _queue(subscriber, event_ids, record_ids, now=now,
                       positions=(event_position, record_position),
                       holes=(event_holes, record_holes),
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
           positions: tuple[Position, Position], holes: tuple[Holes, Holes],
           fresh: bool) -> None:
    if event_ids or record_ids:
        # In the order written, both kinds together: deliveries due at once are sent in the
        # order of their ids, and a subscriber must not hear that a run completed before it
        # hears of the steps that led there. On equal times (one transaction) a step's
        # outcome goes first: the status change is what it led to.
        written = sorted([(at, 0, pk) for pk, at in record_ids]
                         + [(at, 1, pk) for pk, at in event_ids])
        WebhookDelivery.objects.bulk_create(
            [WebhookDelivery(subscriber=subscriber, delivery_id=uuid.uuid4(),
                             next_attempt_at=now,
                             **{"event_id" if is_event else "record_id": pk})
             for _, is_event, pk in written],
            ignore_conflicts=True)
    if any(h.wants_horizon for h in holes):
        # Without a fresh id (a caller's transaction had one before the pass), none is
        # taken, and the holes wait.
        # This transaction's id, given now: after the pass read the rows, so newer than the
        # id of every transaction that had one by then. Not a snapshot's xmax: that is one
        # past the newest transaction that has ended, and one still open may stand above it.
        horizon = store.current().transaction_id() if fresh else None
        holes = tuple(replace(h, horizon=horizon, wants_horizon=False) if h.wants_horizon
                      else h for h in holes)
    fields = {**positions[0].fields("event"), **positions[1].fields("record"),
              **holes[0].fields("event"), **holes[1].fields("record")}
    if any(getattr(subscriber, name) != value for name, value in fields.items()):
        WebhookSubscriber.objects.filter(pk=subscriber.pk).update(**fields)


def _unqueued(subscriber, matching, kind: str, position: Position, holes: Holes, *,
              transactions: OpenTransactions | None, clock: Callable[[], datetime],
              limit: int) -> tuple[list[tuple[int, datetime]], Position, Holes]:
    """((id, time written) of the `matching` rows the subscriber has no delivery of yet,
    up to `limit`: first those that filled a hole below `position.through`, then those after
    it; its position after them; its holes as this pass judged them). The cursor moves over
    every row written, matching or not, up to the first hole that may still fill; the rows
    beyond it are queued all the same, and only the holes are read again."""
    rows = matching.model.objects.order_by("pk").values_list("pk", "created_at")
    # The holes below `through`: the rows that filled them since they were last read.
    filled = list(rows.filter(_among(position.missing))[:limit]) if position.missing else []
    # Past the last row read, a hole's ids were not read again: none is known missing.
    read_to = filled[-1][0] if len(filled) == limit else None
    missing = _without(position.missing, (pk for pk, _ in filled))
    written = list(rows.filter(pk__gt=position.through)[:SCAN])
    new_holes = _holes_in(position.through, [pk for pk, _ in written])
    # At most HOLES_KEPT holes are kept: the rows from the first one over on wait, as they
    # would behind the cursor, for a pass that keeps fewer.
    kept = max(HOLES_KEPT - len(missing), 0)
    bound = written[-1][0] if written else position.through
    if len(new_holes) > kept:
        bound = new_holes[kept][0] - 1

    def unqueued(candidates: QuerySet) -> QuerySet:
        # Those with a delivery already (queued past a hole by an earlier release, which
        # read every pass from the cursor on) are left out here, not counted against `limit`.
        return (candidates.exclude(Exists(WebhookDelivery.objects.filter(
            subscriber=subscriber, **{f"{kind}_id": OuterRef("pk")})))
            .order_by("pk").values_list("pk", flat=True))

    ids = list(unqueued(matching.filter(pk__in=[pk for pk, _ in filled]))) if filled else []
    room = limit - len(ids)
    if room <= 0 or bound == position.through:
        through = position.through
    else:
        after = list(unqueued(matching.filter(pk__gt=position.through, pk__lte=bound))[:room])
        # Cut at the limit: the rest are read again next pass.
        through = after[-1] if len(after) == room else bound
        ids += after
        missing += tuple(hole for hole in new_holes if hole[0] <= through)
    # Ids up to here that are missing stay missing.
    if transactions is None:
        final = through
    elif holes.horizon is not None and transactions.oldest > holes.horizon:
        final = holes.upto
    else:
        final = position.cursor
    if read_to is not None:
        final = min(final, read_to)
    missing = tuple((max(first, final + 1), last) for first, last in missing if last > final)
    cursor = missing[0][0] - 1 if missing else through
    # Each matching row is one of those read above, its time with it; one that committed in
    # between is in a hole read above, and is queued next pass.
    dated = dict(filled + written)
    queued = [(pk, dated[pk]) for pk in ids if pk in dated]
    return queued, Position(cursor, through, missing), _judged(
        holes, transactions, cursor, clock=clock,
        waits_at=missing[0][0] if missing else None, newest=through)


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


def _judged(holes: Holes, transactions: OpenTransactions | None, cursor: int, *,
            clock: Callable[[], datetime], waits_at: int | None, newest: int) -> Holes:
    """A cursor's holes after a pass that moved it to `cursor`, the first hole it waits at
    being `waits_at` (None: none) and its rows read through `newest`."""
    if transactions is None:
        return Holes()
    if holes.upto is not None and cursor < holes.upto:
        # Still ahead of the cursor: what they say stays true, and a horizon is taken once
        # the transactions that drew the ids have their transaction ids.
        if (waits_at is not None and waits_at <= holes.upto and holes.horizon is None
                and clock() >= holes.seen_at + HOLE_MIN_AGE):
            return replace(holes, wants_horizon=True)
        return holes
    if waits_at is None:
        return Holes()
    # Now, after the rows up to `newest` were read: each was drawn before.
    return Holes(upto=newest, seen_at=clock())


def _body(delivery: WebhookDelivery) -> bytes:
    if delivery.record_id is not None:
        record = delivery.record
        run, at = record.run, record.created_at
        # A step's outcome: the run's status around it as the record saw it, when it says.
        status_from = (record.before or {}).get("status", "")
        moved = {"from": status_from,
                 "to": (record.after or {}).get("status", status_from)}
        step = {"name": record.step_name, "outcome": record.action}
    else:
        event = delivery.event
        run, at = event.run, event.created_at
        moved = {"from": event.status_from, "to": event.status_to}
        # Step outcomes written before they were read from the audit chain.
        step = {"name": event.step_name, "outcome": event.outcome} if event.step_name else None
    # The shape the OpenAPI document publishes (api.schemas.RunStatusChanged,
    # RunStepCompleted; the document's test checks real bodies against it). Not validated
    # here: a row of an older release outside the published values would otherwise stop
    # every pass at its delivery.
    body = {
        "delivery_id": str(delivery.delivery_id),
        "type": "run.step_completed" if step else "run.status_changed",
        "run": {"id": run.pk, "workflow": run.workflow_name, "business_key": run.business_key,
                "status_url": public_url(reverse("api:run_state", args=[run.pk]))},
        **moved,
        "at": at.isoformat(),
    }
    if step:
        body["step"] = step
    return json.dumps(body, separators=(",", ":")).encode()


def send_due(*, now: datetime | None = None, limit: int = 100) -> PublishReport:
    """Send the deliveries that are due; a failure is tried again later with backoff.

    A subscriber whose endpoint gives no answer (a timeout, a refused connection) is not
    tried again in the same pass: with up to `limit` deliveries each waiting out the
    deadline, one dead endpoint would hold every other subscriber's deliveries back.

    A subscriber an admin deactivated is sent nothing, not even what was queued for it
    before: deactivating is how a subscriber is stopped (it is never deleted). Its pending
    deliveries wait, as its cursors do, and go out if it is made active again. One whose
    workflows an admin narrowed is sent nothing of a workflow it no longer takes, even if
    it was queued before (withdrawn)."""
    now = now or timezone.now()
    report = PublishReport()
    due = (WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING,
                                          next_attempt_at__lte=now, subscriber__active=True)
           .select_related("subscriber", "event__run", "record__run")
           .order_by("next_attempt_at", "pk")[:limit])
    # Subscribers that gave no answer in this pass, with when their endpoint is tried again.
    unanswered: dict[int, datetime] = {}
    with DeadlinePoster(settings.WEBHOOK_TIMEOUT_SECONDS) as poster:
        for delivery in due:
            if not still_subscribed(delivery):
                _withdraw(delivery, report)
                continue
            if delivery.subscriber_id in unanswered:
                _defer(delivery, unanswered[delivery.subscriber_id], report)
                continue
            code, error = _attempt(poster, delivery)
            retry_at = _record_attempt(delivery, now, code, error, report)
            if code is None:
                unanswered[delivery.subscriber_id] = retry_at
    return report


class DeadlinePoster:
    """POSTs with one deadline over the whole exchange, on one connection pool per pass.

    httpx's timeouts are per operation (connecting, each read): a receiver that sends its
    headers a byte at a time, each within the timeout, would hold the pass for ever. Only
    cancellation bounds the whole exchange, and only httpx's async client can be cancelled.
    The pass stays synchronous: its database work runs between exchanges, never while the
    event loop runs, and the loop is its own (not installed as the thread's)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)
        # Only public addresses, in a deployment (api.public_network): the URL is an admin's.
        self.client = httpx.AsyncClient(timeout=seconds,
                                        transport=public_network.subscriber_transport())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.runner.run(self.client.aclose())
        finally:
            self.runner.close()

    def post(self, url: str, body: bytes, headers: dict) -> int:
        """The answer's status code; raises TimeoutError when the deadline passes first."""
        return self.runner.run(self._post(url, body, headers))

    async def _post(self, url: str, body: bytes, headers: dict) -> int:
        async with asyncio.timeout(self.seconds):
            # Only the status matters. The body is never read, so an endless or dribbled
            # one costs nothing: closing the response closes the connection, undrained.
            async with self.client.stream("POST", url, content=body,
                                          headers=headers) as response:
                return response.status_code


# No answer at all: the endpoint, not the delivery, is the problem, and the subscriber's
# next delivery would wait for nothing the same way (an answer, even 500, is about its own
# delivery). An address the HTTP client refuses (a host the URL field takes but IDNA does
# not) is one for every delivery, and must not end the pass for every subscriber.
NO_ANSWER = (httpx.TransportError, httpx.InvalidURL)


def _attempt(poster: DeadlinePoster, delivery: WebhookDelivery) -> tuple[int | None, str]:
    """(status code, error) of one attempt: no code when there was no answer."""
    body = _body(delivery)
    # The time of sending, not the pass's `now`: a pass may spend WEBHOOK_TIMEOUT_SECONDS
    # on each of its deliveries, and a receiver refusing old timestamps (as it should) would
    # refuse, for good, what a long pass stamped minutes before sending it.
    stamp = str(int(time.time()))
    try:
        code = poster.post(delivery.subscriber.url, body, {
            "Content-Type": "application/json",
            "X-Webhook-Id": str(delivery.delivery_id),
            "X-Webhook-Timestamp": stamp,
            "X-Webhook-Signature": sign(delivery.subscriber.secret, stamp, body),
        })
    except TimeoutError:
        return None, f"no answer within {poster.seconds:g} s"
    except NO_ANSWER as exc:
        return None, error_text(exc)
    return code, "" if 200 <= code < 300 else f"HTTP {code}"


def error_text(exc: Exception) -> str:
    """What `last_error` keeps of an exception: text the database stores (a NUL written
    out), cut to a size that fits a list of deliveries."""
    return printable(f"{type(exc).__name__}: {exc}")[:500]


def _record_attempt(delivery, now, code, error, report) -> datetime | None:
    """Store the attempt; when it failed, the time its endpoint is next tried."""
    attempts = delivery.attempts + 1
    fields = {"attempts": attempts, "last_status_code": code, "last_error": error}
    backoff = RETRY.base_delay(attempts)
    if not error:
        fields.update(status=WebhookDelivery.Status.DELIVERED, delivered_at=now)
        report.delivered += 1
    elif attempts >= RETRY.maximum_attempts:
        fields.update(status=WebhookDelivery.Status.FAILED)
        report.failed += 1
        logger.warning("webhook %s to %s failed for good: %s", delivery.delivery_id,
                       delivery.subscriber, error)
    else:
        fields.update(next_attempt_at=now + timedelta(seconds=backoff))
        logger.info("webhook %s to %s failed (%s); next try in %ss", delivery.delivery_id,
                    delivery.subscriber, error, backoff)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    return None if not error else now + timedelta(seconds=backoff)


def _defer(delivery, retry_at, report) -> None:
    """A delivery not tried because its endpoint gave no answer earlier in the pass: no
    attempt is counted (none was made), and it waits for the time the endpoint is tried
    again. Left due, every pass would spend a whole deadline on the dead endpoint with the
    next delivery in line, whatever the backoff, and count an attempt against each in turn:
    an outage of minutes would use up their attempts. Moved to the same time, the endpoint
    is tried again when its backoff ends, and the rest keep their attempts for when it
    answers."""
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=retry_at)
    report.deferred += 1


def still_subscribed(delivery: WebhookDelivery) -> bool:
    """Whether the delivery's subscriber still takes the workflow of the delivery's run."""
    run = (delivery.record or delivery.event).run
    return takes(delivery.subscriber.workflows, run.workflow_name)


def takes(workflows: list[str], workflow_name: str) -> bool:
    """Whether a subscriber of `workflows` (none: every one) takes `workflow_name`."""
    return not workflows or workflow_name in workflows


def _withdraw(delivery, report) -> None:
    """A delivery of a workflow its subscriber no longer takes: given up, unsent, as if
    the subscriber's workflows had said so when it was queued (events are filtered then).
    Its attempts, if any, stay the record of what was sent."""
    workflow = (delivery.record or delivery.event).run.workflow_name
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status=WebhookDelivery.Status.FAILED,
        last_error=printable(f"not sent: the subscriber no longer takes workflow "
                             f"{workflow!r}")[:500])
    report.withdrawn += 1


@dataclass
class SentAgain:
    # Taken back to pending, due now.
    taken: int = 0
    # Failed, and left so: their subscriber no longer takes their run's workflow (the
    # publisher withdrew them, or would at once, sending nothing).
    not_taken_workflow: int = 0


def send_again(delivery_ids, *, by, now: datetime | None = None) -> SentAgain:
    """Take the failed deliveries among `delivery_ids` (a list, or a query of ids) back to
    pending, due now, with a fresh budget of attempts: a receiver that answered errors for
    longer than the budget's 17 minutes gets what it missed once it answers again. Each
    keeps its delivery id, so a receiver that did get one (its answer lost) drops it. Others
    (pending, delivered) are left as they are, and so is a failed one whose subscriber no
    longer takes its run's workflow (still_subscribed): the next pass would withdraw it
    again, sending nothing, so taking it back would only count what is never sent. Once
    the subscriber takes the workflow again, it may be sent again. Recorded in the access
    chain, one record per subscriber, naming `by` and how many were taken back, in the
    transaction of the change.

    Their last status code and error stay until the next attempt replaces them: the reason
    they failed is what the admin looks at while the receiver is being fixed."""
    now = now or timezone.now()
    result = SentAgain()
    with transaction.atomic():
        # Locked, then changed: a second admin sending the same ones again meanwhile waits,
        # then finds them pending and takes nothing, so each is counted and recorded once.
        # Only the deliveries are locked: a subscriber's row is what a publisher pass holds
        # a share lock on while it queues.
        failed = (WebhookDelivery.objects.select_for_update(of=("self",))
                  .filter(pk__in=delivery_ids, status=WebhookDelivery.Status.FAILED)
                  .order_by("pk").values_list("pk", "subscriber__name", "subscriber__workflows",
                                              "event__run__workflow_name",
                                              "record__run__workflow_name"))
        taken = []
        for pk, name, workflows, event_workflow, record_workflow in failed:
            # still_subscribed, read with the rows rather than one delivery at a time.
            if takes(workflows, record_workflow or event_workflow):
                taken.append((pk, name))
            else:
                result.not_taken_workflow += 1
        if not taken:
            return result
        WebhookDelivery.objects.filter(pk__in=[pk for pk, _ in taken]).update(
            status=WebhookDelivery.Status.PENDING, attempts=0, next_attempt_at=now)
        per_subscriber: dict[str, int] = {}
        for _, name in taken:
            per_subscriber[name] = per_subscriber.get(name, 0) + 1
        for name, count in sorted(per_subscriber.items()):
            record_access_change(action=AccessAction.WEBHOOK_DELIVERIES_SENT_AGAIN,
                                 subject=f"webhook subscriber {name}",
                                 actor=Actor.for_user(by),
                                 before={"status": "failed", "deliveries": count},
                                 after={"status": "pending", "deliveries": count})
    result.taken = len(taken)
    logger.info("%s sent %d failed webhook deliveries again", by.get_username(), len(taken))
    return result


def publish(*, now: datetime | None = None) -> PublishReport:
    """One pass of the publisher (Celery beat): queue new events, send what is due.

    Only one pass runs at a time (runs.machine.single_pass). Two overlapping passes would read the
    same subscriber cursor and the same due deliveries: each event queued twice is refused
    by the unique (subscriber, event), but each due delivery would be POSTed twice, and a
    slow endpoint (up to WEBHOOK_TIMEOUT_SECONDS per delivery) easily outlasts beat's
    interval."""
    with single_pass(JOB) as mine:
        if not mine:
            return PublishReport(locked_out=True)
        return _publish(now)


def _publish(now: datetime | None) -> PublishReport:
    queued = queue_deliveries(now=now)
    report = send_due(now=now)
    report.queued = queued
    return report
