"""A subscriber's workflows say which runs it is told of, when its deliveries are sent as
well as when they are queued: narrowed by an admin, it is sent nothing more of a workflow
it no longer takes, retries of deliveries queued before included. They are given up unsent,
saying why. Every receiver here is a real HTTP server."""

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


def test_narrowed_after_a_delivery_was_queued_it_gets_no_retry_of_it(receiver):
    subscriber = WebhookSubscriber.objects.create(
        name="crm", url=f"{receiver.url}/hooks", secret="k", workflows=["test-orders"],
        **webhook_cursors.cursors_at_head())
    receiver.answer("POST", "/hooks", 500, 204)
    new_run("test-orders")
    now = timezone.now()
    webhooks.publish(now=now)
    assert len(receiver.sent("POST", "/hooks")) == 1  # answered 500: tried again in 2 s
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(workflows=["test-saga"])

    report = webhooks.publish(now=now + timedelta(minutes=5))

    assert len(receiver.sent("POST", "/hooks")) == 1
    assert (report.withdrawn, report.delivered) == (1, 0)
    delivery = WebhookDelivery.objects.get(subscriber=subscriber)
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == \
        ("failed", 1, 500)
    assert delivery.last_error == "not sent: the subscriber no longer takes workflow " \
        "'test-orders'"


def test_widened_to_every_workflow_it_still_gets_what_was_queued(receiver):
    subscriber = WebhookSubscriber.objects.create(
        name="crm", url=f"{receiver.url}/hooks", secret="k", workflows=["test-orders"],
        **webhook_cursors.cursors_at_head())
    new_run("test-orders")
    now = timezone.now()
    webhook_cursors.queue_deliveries(now=now)
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(workflows=[])

    report = webhooks.send_due(now=now)

    assert (report.delivered, report.withdrawn) == (1, 0)
    assert len(receiver.sent("POST", "/hooks")) == 1
