"""Deliveries are POSTed over HTTP(S). Django's URL check also takes ftp:// and ftps://, a
port past 65535 and a host IDNA refuses: a subscriber made with one over the API or in
admin was written, and each of its deliveries failed ("unsupported protocol"), or, for the
port, ended every publisher pass before any subscriber's delivery. Now such a URL is
refused where it is given (422 naming `url` over the API, the form's error in admin), and
nothing is written or recorded; a subscriber stored with one before may still be turned
off."""

import pytest

from api.models import WebhookSubscriber
from api.subscribers import sealed_secret
from audit.models import AccessRecord
from tests.admin.test_admin_lists import admin_client  # noqa: F401 - the fixture
from tests.api.test_a_webhook_subscriber_is_made_changed_and_deleted_over_the_api_as_in_admin import (  # noqa: E501,F401
    keeper,
    send,
)

pytestmark = pytest.mark.django_db

SECRET = "whsec-only-the-receiver-4711"


@pytest.mark.parametrize(("url", "said"), [
    ("ftp://files.example.com/hooks", "give an http:// or https:// URL"),
    ("ftps://files.example.com/hooks", "give an http:// or https:// URL"),
    # Django's URL check takes these; no delivery could be sent to either (the connect
    # raised OverflowError, IDNA refuses the emoji this punycode decodes to).
    ("http://127.0.0.1:65536/hooks", "its port 65536 is no port (1 to 65535)"),
    ("http://xn--ls8h.example/hooks", "the HTTP client cannot send to it: InvalidCodepoint"),
])
def test_an_url_no_delivery_can_reach_is_refused_over_the_api(client, keeper, url,  # noqa: F811
                                                              said):
    recorded = AccessRecord.objects.count()  # the token's own record
    response = send(client, "POST", "/api/subscribers", {
        "name": "crm", "url": url, "secret": SECRET, "workflows": ["test-orders"]})

    assert response.status_code == 422, response.content
    [error] = response.json()["errors"]
    assert error["loc"] == ["url"]
    assert said in error["msg"]
    assert not WebhookSubscriber.objects.exists()
    assert AccessRecord.objects.count() == recorded


def test_a_change_to_such_an_url_is_refused_and_a_stored_one_can_still_be_turned_off(
        client, keeper):  # noqa: F811
    made = send(client, "POST", "/api/subscribers", {
        "name": "crm", "url": "https://crm.example.com/hook", "secret": SECRET,
        "workflows": ["test-orders"]})
    assert made.status_code == 201, made.content
    subscriber_id, recorded = made.json()["id"], AccessRecord.objects.count()

    changed = send(client, "PATCH", f"/api/subscribers/{subscriber_id}",
                   {"url": "ftp://files.example.com/hooks"})
    assert changed.status_code == 422
    assert WebhookSubscriber.objects.get().url == "https://crm.example.com/hook"
    assert AccessRecord.objects.count() == recorded

    WebhookSubscriber.objects.filter(pk=subscriber_id).update(url="ftp://old.example.com/x")
    off = send(client, "PATCH", f"/api/subscribers/{subscriber_id}", {"active": False})
    assert off.status_code == 200, off.content
    assert WebhookSubscriber.objects.get().active is False


@pytest.mark.parametrize(("url", "said"), [
    ("ftp://files.example.com/hooks", "give an http:// or https:// URL, not ftp://"),
    ("http://127.0.0.1:65536/hooks", "Its port 65536 is no port (1 to 65535)."),
])
def test_admin_refuses_such_an_url_and_saves_nothing(admin_client, url, said):  # noqa: F811
    response = admin_client.post("/admin/api/webhooksubscriber/add/", {
        "name": "crm", "url": url, "secret": SECRET, "workflows": "[]", "active": "on"})

    assert response.status_code == 200
    assert said in response.text
    assert not WebhookSubscriber.objects.exists() and not AccessRecord.objects.exists()


def test_admin_still_turns_off_a_subscriber_stored_with_such_an_url(admin_client):  # noqa: F811
    stored = WebhookSubscriber.objects.create(name="crm", url="ftp://old.example.com/x",
                                              secret=sealed_secret(SECRET), workflows=[])
    response = admin_client.post(f"/admin/api/webhooksubscriber/{stored.pk}/change/", {
        "name": "crm", "url": "ftp://old.example.com/x", "secret": "", "workflows": "[]"})

    assert response.status_code == 302, response.content[:2000]
    assert WebhookSubscriber.objects.get().active is False
