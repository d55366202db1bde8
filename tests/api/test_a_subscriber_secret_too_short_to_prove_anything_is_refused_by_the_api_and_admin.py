"""A subscriber's deliveries are signed with its secret (HMAC-SHA256), and a receiver trusts
a delivery because only the secret's holder could have signed it. POST/PATCH
/api/subscribers and Django admin took a secret of one to three characters, which anyone
forging a delivery tries in moments. Now a new secret shorter than SECRET_MIN_LENGTH is
refused where it is given (422 naming `secret` over the API, the field's error in admin),
and nothing is written or recorded; a subscriber stored with a short one before keeps it
and may still be turned off without a new one."""

import pytest

from api.models import WebhookSubscriber
from api.subscribers import SECRET_MIN_LENGTH, opened, sealed_secret
from audit.models import AccessRecord
from tests.admin.test_admin_lists import admin_client  # noqa: F401 - the fixture
from tests.api.test_a_webhook_subscriber_is_made_changed_and_deleted_over_the_api_as_in_admin import (  # noqa: E501,F401
    keeper,
    send,
)

pytestmark = pytest.mark.django_db

SECRET = "whsec-only-the-receiver-4711"
SHORT = "s3cret-of-15-ch"


def test_the_shortest_secret_taken_is_sixteen_characters():
    assert SECRET_MIN_LENGTH == 16 and len(SHORT) == SECRET_MIN_LENGTH - 1


@pytest.mark.parametrize("secret", ["s3c", SHORT])
def test_a_short_secret_is_refused_over_the_api(client, keeper, secret):  # noqa: F811
    recorded = AccessRecord.objects.count()  # the token's own record
    response = send(client, "POST", "/api/subscribers", {
        "name": "crm", "url": "https://crm.example.com/hook", "secret": secret,
        "workflows": ["test-orders"]})

    assert response.status_code == 422, response.content
    [error] = response.json()["errors"]
    assert error["loc"] == ["secret"]
    assert "16 characters" in error["msg"]
    assert secret not in response.text
    assert not WebhookSubscriber.objects.exists()
    assert AccessRecord.objects.count() == recorded


def test_the_openapi_document_says_how_short_a_secret_may_be(client):
    schemas = client.get("/api/openapi.json").json()["components"]["schemas"]

    assert schemas["SubscriberIn"]["properties"]["secret"]["minLength"] == SECRET_MIN_LENGTH


def test_a_change_to_a_short_secret_is_refused_and_a_stored_one_can_still_be_turned_off(
        client, keeper):  # noqa: F811
    made = send(client, "POST", "/api/subscribers", {
        "name": "crm", "url": "https://crm.example.com/hook",
        "secret": "x" * SECRET_MIN_LENGTH, "workflows": ["test-orders"]})
    assert made.status_code == 201, made.content
    subscriber_id, recorded = made.json()["id"], AccessRecord.objects.count()

    changed = send(client, "PATCH", f"/api/subscribers/{subscriber_id}", {"secret": "n3w"})
    assert changed.status_code == 422
    assert changed.json()["errors"][0]["loc"] == ["secret"]
    stored = WebhookSubscriber.objects.get()
    assert opened(stored.secret) == "x" * SECRET_MIN_LENGTH and not stored.previous_secret
    assert AccessRecord.objects.count() == recorded

    WebhookSubscriber.objects.filter(pk=subscriber_id).update(secret=sealed_secret("s"))
    off = send(client, "PATCH", f"/api/subscribers/{subscriber_id}", {"active": False})
    assert off.status_code == 200, off.content
    stored = WebhookSubscriber.objects.get()
    assert stored.active is False and opened(stored.secret) == "s"


def test_admin_refuses_a_short_secret_and_saves_nothing(admin_client):  # noqa: F811
    response = admin_client.post("/admin/api/webhooksubscriber/add/", {
        "name": "crm", "url": "https://crm.example.com/hook", "secret": SHORT,
        "workflows": "[]", "active": "on"})

    assert response.status_code == 200
    assert "give at least 16 characters" in response.text
    assert not WebhookSubscriber.objects.exists() and not AccessRecord.objects.exists()


def test_admin_refuses_a_short_new_secret_for_a_stored_subscriber(admin_client):  # noqa: F811
    stored = WebhookSubscriber.objects.create(name="crm", url="https://crm.example.com/hook",
                                              secret=sealed_secret(SECRET), workflows=[])
    response = admin_client.post(f"/admin/api/webhooksubscriber/{stored.pk}/change/", {
        "name": "crm", "url": "https://crm.example.com/hook", "secret": "n3w",
        "workflows": "[]", "active": "on"})

    assert response.status_code == 200
    assert "give at least 16 characters" in response.text
    assert opened(WebhookSubscriber.objects.get().secret) == SECRET
    assert not AccessRecord.objects.exists()


def test_admin_still_turns_off_a_subscriber_stored_with_a_short_secret(admin_client):  # noqa: F811
    stored = WebhookSubscriber.objects.create(name="crm", url="https://crm.example.com/hook",
                                              secret=sealed_secret("s"), workflows=[])
    response = admin_client.post(f"/admin/api/webhooksubscriber/{stored.pk}/change/", {
        "name": "crm", "url": "https://crm.example.com/hook", "secret": "",
        "workflows": "[]"})

    assert response.status_code == 302, response.content[:2000]
    stored = WebhookSubscriber.objects.get()
    assert stored.active is False and opened(stored.secret) == "s"
