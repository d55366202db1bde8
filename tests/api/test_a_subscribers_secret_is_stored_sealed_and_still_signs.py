"""A webhook subscriber's secret is stored sealed with the field encryption key in use
(api.subscribers.sealed_secret), never in clear: a copy of the database (a backup, a
replica, a dump) no longer signs deliveries a receiver takes as ours. The deliveries are
signed with the secret the admin typed, as before; a key rotated in front still opens the
secrets sealed with the older one; a secret sealed with a key no longer held is not sent
unsigned, and its delivery says why. Secrets stored in clear before are sealed by the
migration."""

import hashlib
import hmac
import json
from importlib import import_module

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.loader import MigrationLoader

from api import webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from api.subscribers import signing_secret, subscriber_create, subscriber_save
from tests.factories import new_run
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db

SECRET = "whsec-4711-typed-by-an-admin"
OTHER_KEY = "f2:" + "B" * 43 + "="


@pytest.fixture
def receiver():
    made = WebhookReceiver()
    yield made
    made.close()


def _stored(subscriber) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM api_webhooksubscriber WHERE id = %s",
                       [subscriber.pk])
        return cursor.fetchone()[0]


def _subscribe(url: str) -> WebhookSubscriber:
    subscriber = WebhookSubscriber(name="erp", url=url, secret=SECRET)
    subscriber_create(subscriber, by=User.objects.create_superuser("root"))
    return WebhookSubscriber.objects.get(pk=subscriber.pk)


def _signed_with(secret: str, request) -> bool:
    headers, body = request
    expected = hmac.new(secret.encode(), headers["X-Webhook-Timestamp"].encode() + b"." + body,
                        hashlib.sha256).hexdigest()
    return headers["X-Webhook-Signature"] == f"sha256={expected}"


def test_the_secret_is_stored_sealed_and_deliveries_are_signed_with_it(receiver):
    subscriber = _subscribe(receiver.url)
    stored = _stored(subscriber)
    assert SECRET not in stored and stored.startswith("enc:")
    new_run()
    webhooks.publish()
    assert receiver.requests, "nothing was delivered"
    assert all(_signed_with(SECRET, request) for request in receiver.requests)


def test_a_key_rotated_in_front_still_opens_it_and_a_replaced_secret_is_sealed_anew(
        settings):
    subscriber = _subscribe("https://erp.example.com/hook")
    settings.FIELD_ENCRYPTION_KEYS = {"f2": OTHER_KEY.split(":", 1)[1],
                                      **settings.FIELD_ENCRYPTION_KEYS}
    assert signing_secret(WebhookSubscriber.objects.get(pk=subscriber.pk)) == SECRET
    subscriber.secret = "whsec-replaced"
    subscriber_save(subscriber, by=User.objects.get(username="root"))
    stored = _stored(subscriber)
    assert stored.startswith("enc:f2:") and "whsec-replaced" not in stored
    assert signing_secret(WebhookSubscriber.objects.get(pk=subscriber.pk)) == "whsec-replaced"


def test_a_secret_sealed_with_a_key_no_longer_held_is_not_sent_unsigned(settings,
                                                                        receiver):
    subscriber = _subscribe(receiver.url)
    new_run()
    settings.FIELD_ENCRYPTION_KEYS = {"f2": OTHER_KEY.split(":", 1)[1]}
    webhooks.publish()
    assert receiver.requests == []
    delivery = WebhookDelivery.objects.filter(subscriber=subscriber).first()
    assert delivery.status == WebhookDelivery.Status.PENDING
    assert "its secret cannot be opened" in delivery.last_error
    assert "FIELD_ENCRYPTION_KEYS does not hold" in delivery.last_error


def test_the_migration_seals_the_secrets_stored_in_clear(settings):
    clear = WebhookSubscriber.objects.create(name="old", url="https://old.example.com/h",
                                             secret=SECRET)
    migration = import_module("api.migrations.0012_subscriber_secrets_sealed")
    historical = MigrationLoader(connection).project_state(
        ("api", "0012_subscriber_secrets_sealed")).apps
    migration.seal_secrets(historical, None)
    stored = _stored(clear)
    assert SECRET not in stored and stored.startswith("enc:")
    assert signing_secret(WebhookSubscriber.objects.get(pk=clear.pk)) == SECRET
    # Run again (a migration is applied once, but a row already sealed is left as it is).
    migration.seal_secrets(historical, None)
    assert _stored(clear) == stored
    assert json.dumps(SECRET) not in stored
