"""A webhook subscriber's secret replaced in admin keeps signing beside the new one for
WEBHOOK_SECRET_OVERLAP_HOURS: each delivery's X-Webhook-Signature then carries one signature
per secret, comma-separated, so that a receiver still checking the old secret and one
already checking the new take every delivery. Once the overlap has ended only the new
secret signs, and the replaced one is no longer stored. A leaked secret is stopped at once
("Stop the replaced secret signing now"), and one no key opens any more is replaced
without an overlap (it cannot sign), where the save failed. The replaced secret is stored
sealed, and neither secret is in a page, the access chain or a log. Each receiver is a real
HTTP endpoint on localhost, verifying as docs/operations.md tells receivers to."""

import hashlib
import hmac
import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from api import webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from api.subscribers import subscriber_create
from audit.models import AccessRecord
from tests.factories import new_run
from tests.webhook_receiver import WebhookReceiver

from ..admin.test_admin_lists import admin_client  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

OLD, NEW = "whsec-old-4711-receivers-know", "whsec-new-0815-being-rolled-out"


def verifies(secret: str, headers: dict, body: bytes) -> bool:
    """A receiver's check: any of the header's signatures is the one `secret` makes."""
    mac = hmac.new(secret.encode(), headers["X-Webhook-Timestamp"].encode() + b"." + body,
                   hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(sent.strip(), f"sha256={mac}")
               for sent in headers["X-Webhook-Signature"].split(","))


@pytest.fixture
def receiver():
    """A receiver that takes a delivery (204) only when it verifies with the secret it is
    set to check (`receiver.checks`), and refuses it (401) otherwise."""
    made = WebhookReceiver()
    made.checks = OLD
    made.answer = lambda headers, body: 204 if verifies(made.checks, headers, body) else 401
    yield made
    made.close()


@pytest.fixture
def subscriber(receiver, admin_client):  # noqa: F811
    made = WebhookSubscriber(name="erp", url=receiver.url, secret=OLD)
    subscriber_create(made, by=User.objects.get(username="root"))
    return WebhookSubscriber.objects.get(pk=made.pk)


def replace_secret(client, subscriber, secret: str, **more) -> None:
    response = client.post(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/", {
        "name": subscriber.name, "url": subscriber.url, "secret": secret, "workflows": "[]",
        "active": "on", **more})
    assert response.status_code == 302, response.content


def deliveries(subscriber) -> list[WebhookDelivery]:
    return list(WebhookDelivery.objects.filter(subscriber=subscriber).order_by("pk"))


@pytest.mark.parametrize("checked", [OLD, NEW])
def test_during_the_overlap_a_receiver_on_either_secret_takes_every_delivery(
        admin_client, subscriber, receiver, checked):  # noqa: F811
    replace_secret(admin_client, subscriber, NEW)
    receiver.checks = checked
    new_run()

    report = webhooks.publish()

    assert report.delivered == len(receiver.requests) > 0
    assert all(d.status == WebhookDelivery.Status.DELIVERED for d in deliveries(subscriber))
    for headers, body in receiver.requests:
        first, second = headers["X-Webhook-Signature"].split(",")
        # The new secret's first; both, whichever a receiver checks.
        assert first == webhooks.sign(NEW, headers["X-Webhook-Timestamp"], body)
        assert second == webhooks.sign(OLD, headers["X-Webhook-Timestamp"], body)


def test_after_the_overlap_only_the_new_secret_signs(admin_client, subscriber,  # noqa: F811
                                                     receiver):
    replace_secret(admin_client, subscriber, NEW)
    stored = WebhookSubscriber.objects.get(pk=subscriber.pk)
    hours = (stored.previous_secret_until - timezone.now()) / timedelta(hours=1)
    assert 23.9 < hours <= 24
    # The overlap's end comes.
    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(
        previous_secret_until=timezone.now() - timedelta(seconds=1))
    new_run()

    report = webhooks.publish()

    # The receiver still on the old secret refuses each delivery: none is delivered.
    assert receiver.requests and report.delivered == 0
    assert all(d.last_status_code == 401 and d.status == WebhookDelivery.Status.PENDING
               for d in deliveries(subscriber))
    for headers, body in receiver.requests:
        assert "," not in headers["X-Webhook-Signature"]
        assert verifies(NEW, headers, body) and not verifies(OLD, headers, body)
    stored = WebhookSubscriber.objects.get(pk=subscriber.pk)
    assert stored.previous_secret == "" and stored.previous_secret_until is None

    # Switched to the new secret, it takes them all.
    receiver.checks = NEW
    WebhookDelivery.objects.update(next_attempt_at=timezone.now())
    webhooks.publish()
    assert all(d.status == WebhookDelivery.Status.DELIVERED for d in deliveries(subscriber))


@pytest.mark.parametrize("how", ["stopped on the form", "no overlap set"])
def test_a_secret_stopped_at_once_signs_nothing_more(admin_client, subscriber,  # noqa: F811
                                                     receiver, settings, how):
    if how == "no overlap set":
        settings.WEBHOOK_SECRET_OVERLAP_HOURS = 0
        replace_secret(admin_client, subscriber, NEW)
    else:
        replace_secret(admin_client, subscriber, NEW, end_overlap="on")
    new_run()

    report = webhooks.publish()

    assert receiver.requests and report.delivered == 0
    assert all(not verifies(OLD, h, b) and verifies(NEW, h, b) for h, b in receiver.requests)
    stored = WebhookSubscriber.objects.get(pk=subscriber.pk)
    assert stored.previous_secret == "" and stored.previous_secret_until is None


def test_an_overlap_under_way_is_ended_by_a_later_save(admin_client, subscriber,  # noqa: F811
                                                       receiver):
    replace_secret(admin_client, subscriber, NEW)
    replace_secret(admin_client, subscriber, "", end_overlap="on")
    new_run()

    webhooks.publish()

    assert receiver.requests
    assert all(not verifies(OLD, h, b) and verifies(NEW, h, b) for h, b in receiver.requests)
    ended = AccessRecord.objects.order_by("seq").last()
    assert "previous_secret_signs_until" in ended.before
    assert "previous_secret_signs_until" not in ended.after


def test_neither_secret_is_in_a_page_a_record_or_a_log(admin_client, subscriber,  # noqa: F811
                                                       receiver, caplog):
    with caplog.at_level(logging.DEBUG):
        replace_secret(admin_client, subscriber, NEW)
        new_run()
        webhooks.publish()
        page = admin_client.get(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/")

    assert receiver.requests
    assert page.status_code == 200
    assert "signs beside the current one until" in page.text
    stored = WebhookSubscriber.objects.get(pk=subscriber.pk)
    assert stored.previous_secret.startswith("enc:")
    records = str(list(AccessRecord.objects.values()))
    replaced = AccessRecord.objects.get(action="webhook_subscriber_changed")
    assert replaced.after == {
        "secret": "replaced (not recorded)",
        "previous_secret_signs_until": stored.previous_secret_until.isoformat()}
    for secret in (OLD, NEW):
        assert secret not in page.text
        assert secret not in stored.previous_secret and secret not in stored.secret
        assert secret not in records
        assert secret not in caplog.text
        assert secret not in str([d.last_error for d in deliveries(subscriber)])


def test_a_secret_no_key_opens_is_replaced_and_only_the_new_one_signs(
        admin_client, subscriber, receiver, settings):  # noqa: F811
    settings.FIELD_ENCRYPTION_KEYS = {"f9": "C" * 43 + "="}
    replace_secret(admin_client, subscriber, NEW)
    receiver.checks = NEW
    new_run()

    report = webhooks.publish()

    assert report.delivered == len(receiver.requests) > 0
    assert all("," not in headers["X-Webhook-Signature"] for headers, _ in receiver.requests)
    stored = WebhookSubscriber.objects.get(pk=subscriber.pk)
    assert stored.secret.startswith("enc:f9:") and stored.previous_secret == ""
