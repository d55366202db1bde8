"""What an alert on webhooks reads at 3 a.m.: the age of the oldest delivery not answered
counts a step outcome's as well as a status change's (an outage that left only outcomes
pending read 0 before), and the age of what runs wrote that the publisher has not queued
(its cursors held, or it not running) is a gauge of its own. An inactive subscriber's
waiting is an admin's choice, and counts in neither."""

from datetime import timedelta

import pytest
from django.utils import timezone

from api import webhooks
from api.metrics import metric_families
from api.models import WebhookDelivery, WebhookSubscriber
from api.webhook_cursors import cursors_at_head
from runs.execution import executor
from tests.factories import new_run
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db
HOUR = timedelta(hours=1)


@pytest.fixture
def down():
    """A receiver that answers 503 to everything."""
    receiver = WebhookReceiver(lambda headers, body: 503)
    yield receiver
    receiver.close()


def _gauges(now) -> dict[str, float]:
    return {family.name: family.samples[0].value for family in metric_families(now)
            if family.samples and not family.samples[0].labels}


def test_a_backlog_of_step_outcomes_alone_has_an_age(down, script):
    WebhookSubscriber.objects.create(name="crm", url=down.url, secret="k")
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    webhooks.publish()
    pending = WebhookDelivery.objects.filter(status=WebhookDelivery.Status.PENDING)
    assert pending.filter(record__isnull=False).exists()
    # The status changes got through; the step outcomes did not.
    pending.filter(event__isnull=False).update(status=WebhookDelivery.Status.DELIVERED)
    oldest = min(pending.values_list("record__created_at", flat=True))

    gauges = _gauges(oldest + HOUR)

    assert gauges["durable_webhook_backlog"] == pending.count() > 0
    assert gauges["durable_webhook_oldest_seconds"] == pytest.approx(3600, abs=1)


def test_rows_the_publisher_has_not_queued_have_an_age_until_it_queues_them(down, script):
    subscriber = WebhookSubscriber.objects.create(name="crm", url=down.url, secret="k",
                                                  **cursors_at_head())
    assert _gauges(timezone.now() + HOUR)["durable_webhook_unqueued_seconds"] == 0
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    written = run.events.order_by("pk").first().created_at

    assert _gauges(written + HOUR)["durable_webhook_unqueued_seconds"] == pytest.approx(
        3600, abs=1)
    # Made inactive, its waiting is an admin's choice.
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=False)
    assert _gauges(written + HOUR)["durable_webhook_unqueued_seconds"] == 0
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=True)
    webhooks.publish()
    assert _gauges(written + HOUR)["durable_webhook_unqueued_seconds"] == 0
    assert WebhookDelivery.objects.filter(subscriber=subscriber).exists()
