"""Progress events to subscribers: the deliveries queued per subscriber (api.webhook_cursors:
one for each status change and step outcome it is told of) are sent with retries and
backoff, each signed; one to a URL no delivery can be sent to is failed at once.

Signature: the header `X-Webhook-Signature: sha256=<hex>` is HMAC-SHA256 with the
subscriber's secret over `<X-Webhook-Timestamp>.<body>`; receivers recompute it, compare in
constant time and refuse old timestamps. While a replaced secret still signs
(api.subscribers.signing_secrets) the header lists one signature per secret, comma-separated,
the current secret's first: a receiver accepts a delivery when any of them is its own.
`X-Webhook-Id` is the delivery id, the same on every attempt, for deduplication. A failing
endpoint only delays its own deliveries: the runtime never waits for a subscriber, and the
publisher waits at most WEBHOOK_TIMEOUT_SECONDS for one delivery, reads no response body,
and tries an endpoint that gives no answer once a pass.
"""

import asyncio
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce
from operator import or_

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.urls import reverse

from approvals.notifications import public_url
from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from runs.definitions.retry import RetryPolicy
from runs.machine.sensitive import UnreadableValue
from runs.machine.single_pass import single_pass
from runs.machine.storable import printable

from . import public_network
from .models import WebhookDelivery, WebhookSubscriber
from .subscribers import retire_previous_secrets, signing_secrets, url_problem
from .tokens import clock
from .webhook_cursors import queue_deliveries, taken, takes

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


def signature_header(secrets: list[str], timestamp: str, body: bytes) -> str:
    """The X-Webhook-Signature of `body` signed with each of `secrets`, in their order,
    comma-separated as an HTTP header lists values (a receiver splits on the commas)."""
    return ",".join(sign(secret, timestamp, body) for secret in secrets)


def subscribed_workflows(value) -> list[str]:
    """A subscriber's workflows as stored: the names, sorted, once each. Raises ValueError
    for anything but a list of names: the publisher reads the value as one, and a bare name
    ("invoice-approval") would be taken as its letters, matching no run, so the subscriber
    would silently be told nothing."""
    if not isinstance(value, list) or not all(isinstance(n, str) and n.strip() for n in value):
        raise ValueError('a list of workflow names, e.g. ["invoice-approval"], or [] for '
                         "every workflow")
    return sorted(set(value))


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
    """Send the deliveries that are due; a failure is tried again later with backoff, but
    for one whose subscriber's URL no delivery can ever be sent to (url_problem): that one
    is failed at once, its one attempt saying why, and is sent again (send_again) once an
    admin has corrected the URL.

    A subscriber whose endpoint gives no answer (a timeout, a refused connection) is not
    tried again in the same pass: with up to `limit` deliveries each waiting out the
    deadline, one dead endpoint would hold every other subscriber's deliveries back. Nor is
    one whose exchanges in the pass have taken WEBHOOK_TIMEOUT_SECONDS together: a receiver
    that answers each delivery just within the deadline (a gateway's 504, a busy service's
    204) would hold them back as long. Either way the rest of its deliveries are deferred,
    not tried and their attempts untouched.

    A subscriber an admin deactivated is sent nothing, not even what was queued for it
    before: deactivating is how a subscriber is stopped (it is never deleted). Its pending
    deliveries wait, as its cursors do, and go out if it is made active again. One whose
    workflows an admin narrowed is sent nothing of a workflow it no longer takes, even if
    it was queued before (withdrawn)."""
    now = now or clock()
    report = PublishReport()
    due = (WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING,
                                          next_attempt_at__lte=now, subscriber__active=True)
           .select_related("subscriber", "event__run", "record__run")
           .order_by("next_attempt_at", "pk")[:limit])
    # Subscribers that gave no answer in this pass, with when their endpoint is tried again.
    unanswered: dict[int, datetime] = {}
    # Seconds each subscriber's exchanges have taken in this pass.
    spent: dict[int, float] = {}
    with DeadlinePoster(settings.WEBHOOK_TIMEOUT_SECONDS) as poster:
        for delivery in due:
            if not _subscriber_as_now(delivery):
                continue
            if not still_subscribed(delivery):
                _withdraw(delivery, report)
                continue
            if delivery.subscriber_id in unanswered:
                _defer(delivery, unanswered[delivery.subscriber_id], report)
                continue
            if spent.get(delivery.subscriber_id, 0.0) >= poster.seconds:
                # Its receiver answers, but slowly: the pass's share of one subscriber is
                # one deadline. The rest wait behind what else is due by the time they are
                # passed over, so the next pass too sends the others' first.
                _defer(delivery, max(now, clock()), report)
                continue
            # A URL stored before the rule, or by hand, asked by the rule the API and admin
            # ask of a URL given: it will never be sendable, and retrying it only spends the
            # attempts over hours. Each of its deliveries fails on its own, sending nothing.
            if (problem := url_problem(delivery.subscriber.url)) is not None:
                _record_attempt(delivery, now, None, error_text(f"not sent: {problem}"),
                                report, final=True)
                continue
            started = time.monotonic()
            code, error = _attempt(poster, delivery)
            spent[delivery.subscriber_id] = (spent.get(delivery.subscriber_id, 0.0)
                                             + time.monotonic() - started)
            retry_at = _record_attempt(delivery, now, code, error, report)
            if code is None:
                unanswered[delivery.subscriber_id] = retry_at
    return report


def _subscriber_as_now(delivery: WebhookDelivery) -> bool:
    """Read the delivery's subscriber again, as an admin left it: whether it is still active.

    The due deliveries are read with their subscribers once, when the pass begins, and a
    pass may spend WEBHOOK_TIMEOUT_SECONDS on each of them: an admin who deactivates a
    subscriber, corrects its URL or replaces its secret meanwhile would otherwise see the
    rest of the pass sent to it as it was, to the old URL, signed with the old secret."""
    now = (WebhookSubscriber.objects.filter(pk=delivery.subscriber_id)
           .values("active", "url", "secret", "previous_secret", "previous_secret_until",
                   "workflows").first())
    if now is None or not now["active"]:
        return False
    for name, value in now.items():
        setattr(delivery.subscriber, name, value)
    return True


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
# delivery). An address the HTTP client refuses is one for every delivery, and must not
# end the pass for every subscriber.
NO_ANSWER = (httpx.TransportError, httpx.InvalidURL)


def _attempt(poster: DeadlinePoster, delivery: WebhookDelivery) -> tuple[int | None, str]:
    """(status code, error) of one attempt: no code when there was no answer."""
    body = _body(delivery)
    # The time of sending, not the pass's `now`: a pass may spend WEBHOOK_TIMEOUT_SECONDS
    # on each of its deliveries, and a receiver refusing old timestamps (as it should) would
    # refuse, for good, what a long pass stamped minutes before sending it. By the database's
    # clock, as everything the publisher judges: a publisher's host minutes behind would have
    # every delivery refused as old.
    stamp = str(int(clock().timestamp()))
    try:
        secrets = signing_secrets(delivery.subscriber, now=clock())
    except UnreadableValue as exc:
        # Not sent unsigned: kept for a key put back, or a secret an admin types again.
        return None, error_text(f"not sent: its secret cannot be opened: {exc}")
    # The URL is one a delivery can be sent to (send_due asked url_problem): the HTTP client
    # raises for some others where no delivery's error catches it (a port past 65535, in
    # the connect), which ended the pass for every subscriber.
    try:
        code = poster.post(delivery.subscriber.url, body, {
            "Content-Type": "application/json",
            "X-Webhook-Id": str(delivery.delivery_id),
            "X-Webhook-Timestamp": stamp,
            "X-Webhook-Signature": signature_header(secrets, stamp, body),
        })
    except TimeoutError:
        return None, f"no answer within {poster.seconds:g} s"
    except NO_ANSWER as exc:
        return None, error_text(exc)
    return code, "" if 200 <= code < 300 else f"HTTP {code}"


def error_text(error: Exception | str) -> str:
    """What `last_error` keeps of an error (an exception, or words saying why nothing was
    sent): text the database stores (a NUL written out), cut to a size that fits a list of
    deliveries."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return printable(text)[:500]


def _record_attempt(delivery, now, code, error, report, *, final: bool = False) -> datetime | None:
    """Store the attempt; when it failed, the time its endpoint is next tried. `final`: it
    failed for good, whatever attempts it has left."""
    attempts = delivery.attempts + 1
    fields = {"attempts": attempts, "last_status_code": code, "last_error": error}
    backoff = RETRY.base_delay(attempts)
    if not error:
        fields.update(status=WebhookDelivery.Status.DELIVERED, delivered_at=now)
        report.delivered += 1
    elif final or attempts >= RETRY.maximum_attempts:
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


def _withdraw(delivery, report) -> None:
    """A delivery of a workflow its subscriber no longer takes: given up, unsent, as if
    the subscriber's workflows had said so when it was queued (events are filtered then).
    Its attempts, if any, stay the record of what was sent."""
    workflow = (delivery.record or delivery.event).run.workflow_name
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        status=WebhookDelivery.Status.FAILED,
        last_error=error_text(f"not sent: the subscriber no longer takes workflow "
                              f"{workflow!r}"))
    report.withdrawn += 1


@dataclass
class SentAgain:
    # Taken back to pending, due now.
    taken: int = 0
    # Failed, and left so: their subscriber no longer takes their run's workflow (the
    # publisher withdrew them, or would at once, sending nothing). Counted to
    # SEND_AGAIN_AT_MOST + 1 at most: past that, "more than SEND_AGAIN_AT_MOST".
    not_taken_workflow: int = 0
    # Failed deliveries that would be taken, past the SEND_AGAIN_AT_MOST taken: left as they
    # are, for the next call.
    more: bool = False


# Failed deliveries one send_again reads, locks and changes at most: admin's "select all"
# hands it a whole filtered list, a million rows in one transaction otherwise. A call takes
# these back to pending, so calling it again on the same list takes the next ones.
SEND_AGAIN_AT_MOST = 1000


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
    they failed is what the admin looks at while the receiver is being fixed.

    The first SEND_AGAIN_AT_MOST failed ones that are taken, by id, at most; `more` says
    whether others are left. Those left failed for their workflow are read past, not
    counted toward the SEND_AGAIN_AT_MOST: they stay failed, so a list beginning with that
    many of them would otherwise take nothing however often it is sent again."""
    now = now or clock()
    result = SentAgain()
    failed = (WebhookDelivery.objects.filter(pk__in=delivery_ids,
                                             status=WebhookDelivery.Status.FAILED)
              # Never null, so that a delivery whose run cannot be read counts as not taken
              # (takes), not as neither.
              .annotate(workflow=Coalesce("record__run__workflow_name",
                                          "event__run__workflow_name", Value(""))))
    with transaction.atomic():
        # still_subscribed, as the query's condition: each subscriber's deliveries of the
        # workflows it takes (subscribers are few; their deliveries are not).
        still = reduce(or_, (Q(subscriber_id=pk) & taken(workflows, "workflow")
                             for pk, workflows in
                             WebhookSubscriber.objects.values_list("pk", "workflows")),
                       Q(pk__in=[]))
        # Locked, then changed: a second admin sending the same ones again meanwhile waits,
        # then finds them pending and takes nothing, so each is counted and recorded once.
        # Only the deliveries are locked: a subscriber's row is what a publisher pass holds
        # a share lock on while it queues.
        taking = list(failed.filter(still).select_for_update(of=("self",)).order_by("pk")
                      .values_list("pk", "subscriber__name")[:SEND_AGAIN_AT_MOST + 1])
        result.more = len(taking) > SEND_AGAIN_AT_MOST
        taking = taking[:SEND_AGAIN_AT_MOST]
        result.not_taken_workflow = (failed.exclude(still).order_by()
                                     [:SEND_AGAIN_AT_MOST + 1].count())
        if not taking:
            return result
        WebhookDelivery.objects.filter(pk__in=[pk for pk, _ in taking]).update(
            status=WebhookDelivery.Status.PENDING, attempts=0, next_attempt_at=now)
        per_subscriber: dict[str, int] = {}
        for _, name in taking:
            per_subscriber[name] = per_subscriber.get(name, 0) + 1
        for name, count in sorted(per_subscriber.items()):
            record_access_change(action=AccessAction.WEBHOOK_DELIVERIES_SENT_AGAIN,
                                 subject=f"webhook subscriber {name}",
                                 actor=Actor.for_user(by),
                                 before={"status": "failed", "deliveries": count},
                                 after={"status": "pending", "deliveries": count})
    result.taken = len(taking)
    logger.info("%s sent %d failed webhook deliveries again", by.get_username(), len(taking))
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
    retire_previous_secrets(now=clock())
    queued = queue_deliveries(now=now)
    report = send_due(now=now)
    report.queued = queued
    return report
