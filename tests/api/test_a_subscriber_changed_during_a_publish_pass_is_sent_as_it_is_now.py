"""An admin who changes a subscriber while a publish pass is sending to it (a pass may spend
WEBHOOK_TIMEOUT_SECONDS on each of up to 100 deliveries) is obeyed at the next delivery:
deactivated, it is sent nothing more; its URL changed, the rest go to the new one; its
secret replaced, the rest are signed with the new one. The pass read the subscriber once,
with its due deliveries, and sent them all as it was then. Every receiver here is a real
HTTP server, and the admin's change is committed by another connection while it answers."""

import threading

import pytest
from django.db import connection

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from tests.factories import new_run
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)


def _admin_changes(subscriber_id: int, **fields):
    """What the receiver does on the first delivery it gets: the admin's change, committed
    from another connection before the answer goes back."""
    done = []

    def answer(headers, body):
        if not done:
            done.append(True)

            def change():
                try:
                    WebhookSubscriber.objects.filter(pk=subscriber_id).update(**fields)
                finally:
                    connection.close()
            admin = threading.Thread(target=change)
            admin.start()
            admin.join(30)
        return 204
    return answer


def _three_deliveries(url: str) -> WebhookSubscriber:
    subscriber = WebhookSubscriber.objects.create(name="crm", url=url, secret="old",
                                                  **webhook_cursors.cursors_at_head())
    for _ in range(3):
        new_run()
    webhook_cursors.queue_deliveries()
    assert WebhookDelivery.objects.filter(subscriber=subscriber).count() == 3
    return subscriber


def test_deactivated_while_it_is_sent_to_it_is_sent_nothing_more():
    receiver = WebhookReceiver()
    try:
        subscriber = _three_deliveries(receiver.url)
        receiver.answer = _admin_changes(subscriber.pk, active=False)

        report = webhooks.send_due()

        assert len(receiver.requests) == 1
        assert report.delivered == 1
        assert WebhookDelivery.objects.filter(subscriber=subscriber,
                                              status="pending", attempts=0).count() == 2
    finally:
        receiver.close()


def test_its_url_changed_while_it_is_sent_to_the_rest_go_to_the_new_one():
    old, new = WebhookReceiver(), WebhookReceiver()
    try:
        subscriber = _three_deliveries(old.url)
        old.answer = _admin_changes(subscriber.pk, url=new.url)

        webhooks.send_due()

        assert len(old.requests) == 1
        assert len(new.requests) == 2
        assert WebhookDelivery.objects.filter(status="delivered").count() == 3
    finally:
        old.close()
        new.close()


def test_its_secret_replaced_while_it_is_sent_to_the_rest_are_signed_with_the_new_one():
    receiver = WebhookReceiver()
    try:
        subscriber = _three_deliveries(receiver.url)
        receiver.answer = _admin_changes(subscriber.pk, secret="new")

        webhooks.send_due()

        signed = [webhooks.sign("new", h["X-Webhook-Timestamp"], body) == h["X-Webhook-Signature"]
                  for h, body in receiver.requests]
        assert signed == [False, True, True]
    finally:
        receiver.close()
