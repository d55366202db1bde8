"""The webhook publisher judges what is due by the database's clock, not its host's: run on a
host whose clock is ten minutes ahead, it sends no delivery whose retry is due in five
minutes (no attempt counted, its due time kept), and a replaced secret whose overlap has
five minutes left still signs beside the new one and is not removed."""

import json
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from api.subscribers import sealed_secret
from api.webhooks import sign
from audit.models import AccessRecord
from runs import store
from tests.factories import new_run
from tests.processes import manage
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)

AHEAD = {"RUNS_TEST_CLOCK_OFFSET_SECONDS": 600}
FIRST, SECOND = "whsec-first-secret", "whsec-second-secret"
PUBLISH = ("import dataclasses, json; from api import webhooks; "
           "print(json.dumps(dataclasses.asdict(webhooks.publish())))")


@pytest.fixture
def receiver():
    r = WebhookReceiver()
    yield r
    r.close()


def _publish_from_a_host_ahead() -> dict:
    process = manage("shell", "-c", PUBLISH, **AHEAD)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _queued(subscriber) -> list[WebhookDelivery]:
    new_run()
    assert webhook_cursors.queue_deliveries(now=store.current().now()) > 0
    return list(WebhookDelivery.objects.filter(subscriber=subscriber).order_by("pk"))


def test_a_retry_due_in_five_minutes_is_not_sent_by_a_publisher_ten_minutes_ahead(receiver):
    subscriber = WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret=FIRST,
                                                  **webhook_cursors.cursors_at_head())
    deliveries = _queued(subscriber)
    # As a first attempt that failed leaves them: tried again after its backoff.
    retry_at = store.current().now() + timedelta(minutes=5)
    WebhookDelivery.objects.filter(subscriber=subscriber).update(
        attempts=1, last_status_code=503, last_error="HTTP 503", next_attempt_at=retry_at)

    report = _publish_from_a_host_ahead()

    assert receiver.requests == []
    assert (report["delivered"], report["failed"], report["deferred"]) == (0, 0, 0)
    after = WebhookDelivery.objects.filter(subscriber=subscriber).order_by("pk")
    assert [(d.pk, d.status, d.attempts, d.next_attempt_at) for d in after] == \
        [(d.pk, "pending", 1, retry_at) for d in deliveries]


def test_a_replaced_secret_with_five_minutes_left_still_signs_on_a_publisher_ten_minutes_ahead(
        receiver):
    until = store.current().now() + timedelta(minutes=5)
    subscriber = WebhookSubscriber.objects.create(
        name="crm", url=receiver.url, secret=sealed_secret(SECOND),
        previous_secret=sealed_secret(FIRST), previous_secret_until=until,
        **webhook_cursors.cursors_at_head())
    deliveries = _queued(subscriber)
    records = AccessRecord.objects.count()

    report = _publish_from_a_host_ahead()

    assert report["delivered"] == len(deliveries) == len(receiver.requests)
    for headers, body in receiver.requests:
        stamp = headers["X-Webhook-Timestamp"]
        assert headers["X-Webhook-Signature"].split(",") == \
            [sign(SECOND, stamp, body), sign(FIRST, stamp, body)]
    subscriber.refresh_from_db()
    assert subscriber.previous_secret and subscriber.previous_secret_until == until
    # Nothing recorded as removed: the overlap has not ended.
    assert AccessRecord.objects.count() == records


@pytest.mark.parametrize("by", [-600, 600], ids=["ten minutes behind", "ten minutes ahead"])
def test_a_deliverys_timestamp_is_the_database_clocks_on_a_publisher_whose_clock_is_off(
        receiver, monkeypatch, by):
    """A receiver refusing old (or future) timestamps, as it should, would refuse every
    delivery of a publisher whose host is minutes off: the stamp is the database's time."""
    subscriber = WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret=FIRST,
                                                  **webhook_cursors.cursors_at_head())
    deliveries = _queued(subscriber)
    real_time, real_now = time.time, timezone.now
    monkeypatch.setattr(time, "time", lambda: real_time() + by)
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=by))
    before = _server_seconds()
    assert webhooks.publish().delivered == len(deliveries) == len(receiver.requests)
    after = _server_seconds()
    for headers, _ in receiver.requests:
        assert before - 2 <= int(headers["X-Webhook-Timestamp"]) <= after + 2


def _server_seconds() -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extract(epoch FROM clock_timestamp())")
        return float(cursor.fetchone()[0])
