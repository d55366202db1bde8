"""Deactivating a subscriber (it is never deleted) stops what is sent to it at once: its
deliveries already queued, retries included, are not sent while it is inactive, and go out
when an admin makes it active again. Every receiver here is a real HTTP server."""

from datetime import timedelta

import pytest
from django.utils import timezone

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from tests.factories import new_run
from tests.receiver import ScriptedReceiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    with ScriptedReceiver() as r:
        yield r


def test_a_deactivated_subscriber_gets_no_retry_of_what_was_queued_for_it(receiver):
    subscriber = WebhookSubscriber.objects.create(name="crm", url=f"{receiver.url}/hooks",
                                                  secret="k", **webhook_cursors.cursors_at_head())
    receiver.answer("POST", "/hooks", 500, 204)
    new_run()
    now = timezone.now()
    webhooks.publish(now=now)
    assert len(receiver.sent("POST", "/hooks")) == 1  # answered 500: tried again in 2 s
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=False)

    report = webhooks.publish(now=now + timedelta(minutes=5))

    assert len(receiver.sent("POST", "/hooks")) == 1
    assert report.delivered == 0
    delivery = WebhookDelivery.objects.get(subscriber=subscriber)
    assert (delivery.status, delivery.attempts) == ("pending", 1)


def test_made_active_again_it_gets_what_waited(receiver):
    subscriber = WebhookSubscriber.objects.create(name="crm", url=f"{receiver.url}/hooks",
                                                  secret="k", **webhook_cursors.cursors_at_head())
    new_run()
    now = timezone.now()
    webhook_cursors.queue_deliveries(now=now)
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=False)
    webhooks.send_due(now=now)
    assert receiver.sent("POST", "/hooks") == []
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=True)

    webhooks.send_due(now=now)

    assert len(receiver.sent("POST", "/hooks")) == 1
    assert WebhookDelivery.objects.get(subscriber=subscriber).status == "delivered"


def test_what_waits_for_a_deactivated_subscriber_is_no_backlog(receiver):
    from prometheus_client import generate_latest

    from observability.metrics import registry

    subscriber = WebhookSubscriber.objects.create(name="crm", url=f"{receiver.url}/hooks",
                                                  secret="k", **webhook_cursors.cursors_at_head())
    receiver.answer("POST", "/hooks", 500, 500)
    new_run()
    webhooks.publish()
    assert "durable_webhook_backlog 1.0" in generate_latest(registry).decode()

    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=False)

    text = generate_latest(registry).decode()
    assert "durable_webhook_backlog 0.0" in text
    assert "durable_webhook_oldest_seconds 0.0" in text
    assert WebhookDelivery.objects.filter(status="pending").count() == 1  # it waits
