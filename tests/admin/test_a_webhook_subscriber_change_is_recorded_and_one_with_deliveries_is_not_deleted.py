"""Where run events are sent is decided by a webhook subscriber's URL, workflows, secret and
active state: admin records each change of them in the access chain (the secret as
replaced, never its value), and refuses to delete a subscriber that has deliveries (the
publisher's record of what was sent where, which protect their subscriber in the schema too),
saying to deactivate it instead."""

import json

import pytest
from django.contrib.auth.models import User
from django.db.models import ProtectedError
from django.test import RequestFactory

from api.models import WebhookDelivery, WebhookSubscriber
from api.subscribers import signing_secret
from audit.access import verify_access_chain
from audit.models import AccessRecord

from .test_admin_lists import admin_client, grow  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

SECRET, NEW_SECRET = "first-secret-value-4711", "second-secret-value-0815"


def form(subscriber: WebhookSubscriber, **changes) -> dict:
    # An empty secret keeps the one stored (sealed: api.subscribers.sealed_secret).
    data = {"name": subscriber.name, "url": subscriber.url, "secret": "",
            "workflows": json.dumps(subscriber.workflows)}
    if subscriber.active:
        data["active"] = "on"
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def no_secret_recorded():
    everything = str(list(AccessRecord.objects.values()))
    assert SECRET not in everything and NEW_SECRET not in everything


def test_creating_and_changing_a_subscriber_is_recorded_without_its_secret(
        admin_client):  # noqa: F811
    response = admin_client.post("/admin/api/webhooksubscriber/add/", {
        "name": "erp", "url": "https://erp.example.com/hook", "secret": SECRET,
        "workflows": '["test-orders"]', "active": "on"})
    assert response.status_code == 302
    erp = WebhookSubscriber.objects.get(name="erp")
    created = AccessRecord.objects.get()
    assert created.action == "webhook_subscriber_created"
    assert created.subject == "webhook subscriber erp" and created.actor_label == "root"
    assert created.before == {}
    assert created.after == {"url": "https://erp.example.com/hook",
                             "workflows": ["test-orders"], "active": True}

    url = f"/admin/api/webhooksubscriber/{erp.pk}/change/"
    response = admin_client.post(url, form(
        erp, name="renamed", url="https://elsewhere.example.net/hook",
        workflows='["test-orders", "test-saga"]', secret=NEW_SECRET))
    assert response.status_code == 302
    erp.refresh_from_db()
    assert erp.name == "erp" and erp.url == "https://elsewhere.example.net/hook"
    assert signing_secret(erp) == NEW_SECRET and NEW_SECRET not in erp.secret
    changed = AccessRecord.objects.order_by("-seq").first()
    assert changed.action == "webhook_subscriber_changed"
    assert changed.subject == "webhook subscriber erp"
    assert changed.before == {"url": "https://erp.example.com/hook",
                              "workflows": ["test-orders"], "secret": "(not recorded)"}
    # The replaced secret signs beside the new one until a time, which is recorded.
    assert changed.after == {"url": "https://elsewhere.example.net/hook",
                             "workflows": ["test-orders", "test-saga"],
                             "secret": "replaced (not recorded)",
                             "previous_secret_signs_until":
                                 erp.previous_secret_until.isoformat()}

    # Deactivated: recorded; saved unchanged: nothing recorded.
    assert admin_client.post(url, form(erp, active=None)).status_code == 302
    erp.refresh_from_db()
    assert not erp.active
    deactivated = AccessRecord.objects.order_by("-seq").first()
    assert (deactivated.before, deactivated.after) == ({"active": True}, {"active": False})
    assert admin_client.post(url, form(erp)).status_code == 302
    assert AccessRecord.objects.count() == 3
    no_secret_recorded()
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None


def test_a_subscriber_with_deliveries_is_not_deleted_and_the_page_says_deactivate(
        admin_client):  # noqa: F811
    grow(2)
    subscriber = WebhookSubscriber.objects.get(name="receiver")
    deliveries = WebhookDelivery.objects.filter(subscriber=subscriber).count()
    assert deliveries == 2
    url = f"/admin/api/webhooksubscriber/{subscriber.pk}/delete/"
    page = admin_client.get(url)
    assert page.status_code == 200 and "Cannot delete" in page.text
    assert "has deliveries" in page.text and "deactivate it instead" in page.text
    assert 'name="post"' not in page.text
    response = admin_client.post(url, {"post": "yes"})
    assert response.status_code == 200 and "deactivate it instead" in response.text
    bulk = admin_client.post("/admin/api/webhooksubscriber/", {
        "action": "delete_selected", "_selected_action": [subscriber.pk], "post": "yes"})
    assert bulk.status_code == 200 and "deactivate it instead" in bulk.text
    assert WebhookSubscriber.objects.filter(pk=subscriber.pk).exists()
    assert WebhookDelivery.objects.filter(subscriber=subscriber).count() == deliveries
    assert AccessRecord.objects.count() == 0


def test_a_delete_that_finds_deliveries_after_the_page_deletes_nothing(
        admin_client):  # noqa: F811
    grow(1)
    subscriber = WebhookSubscriber.objects.get(name="receiver")
    model_admin = admin_client.get("/admin/api/webhooksubscriber/").context[
        "cl"].model_admin
    request = RequestFactory().post("/admin/")
    request.user = User.objects.get(username="root")
    with pytest.raises(Exception, match="deactivate it instead"):
        model_admin.delete_model(request, subscriber)
    assert WebhookDelivery.objects.filter(subscriber=subscriber).count() == 1
    assert AccessRecord.objects.count() == 0


def test_a_subscriber_without_deliveries_is_deleted_and_recorded(admin_client):  # noqa: F811
    idle = WebhookSubscriber.objects.create(name="idle", url="https://idle.example.com/",
                                            secret=SECRET, workflows=["test-orders"])
    other = WebhookSubscriber.objects.create(name="other", url="https://o.example.com/",
                                             secret=SECRET)
    response = admin_client.post(f"/admin/api/webhooksubscriber/{idle.pk}/delete/",
                                 {"post": "yes"})
    assert response.status_code == 302
    assert not WebhookSubscriber.objects.filter(pk=idle.pk).exists()
    bulk = admin_client.post("/admin/api/webhooksubscriber/", {
        "action": "delete_selected", "_selected_action": [other.pk], "post": "yes"})
    assert bulk.status_code == 302
    assert not WebhookSubscriber.objects.filter(pk=other.pk).exists()
    records = list(AccessRecord.objects.order_by("seq"))
    assert [(r.action, r.subject) for r in records] == [
        ("webhook_subscriber_deleted", "webhook subscriber idle"),
        ("webhook_subscriber_deleted", "webhook subscriber other")]
    assert records[0].before == {"url": "https://idle.example.com/",
                                 "workflows": ["test-orders"], "active": True}
    assert records[0].after == {}
    no_secret_recorded()


def test_the_schema_itself_keeps_a_subscriber_that_has_deliveries(admin_client):  # noqa: F811
    # Any path, not only the admin (a shell, a script): the deliveries protect their
    # subscriber, where the foreign key cascaded and deleted the publisher's record.
    grow(1)
    subscriber = WebhookSubscriber.objects.get(name="receiver")
    with pytest.raises(ProtectedError):
        subscriber.delete()
    with pytest.raises(ProtectedError):
        WebhookSubscriber.objects.filter(pk=subscriber.pk).delete()
    assert WebhookSubscriber.objects.filter(pk=subscriber.pk).exists()
    assert WebhookDelivery.objects.filter(subscriber=subscriber).count() == 1


def test_credentials_in_a_subscribers_url_never_reach_the_access_chain(
        admin_client):  # noqa: F811
    # A receiver that authenticates by its URL: the chain is kept for good and hashed.
    response = admin_client.post("/admin/api/webhooksubscriber/add/", {
        "name": "erp", "url": "https://hook:pa55word-9@erp.example.com/hook?token=tok-111",
        "secret": SECRET, "workflows": '["test-orders"]', "active": "on"})
    assert response.status_code == 302
    erp = WebhookSubscriber.objects.get(name="erp")
    created = AccessRecord.objects.get()
    assert created.after["url"] == "https://[redacted]@erp.example.com/hook?token=[redacted]"

    # Only the token changed: the change is recorded, its value is not.
    url = f"/admin/api/webhooksubscriber/{erp.pk}/change/"
    assert admin_client.post(url, form(
        erp, url="https://hook:pa55word-9@erp.example.com/hook?token=tok-222")
    ).status_code == 302
    changed = AccessRecord.objects.order_by("-seq").first()
    assert changed.action == "webhook_subscriber_changed"
    assert changed.after["url"].endswith("(masked parts: replaced, not recorded)")
    everything = str(list(AccessRecord.objects.values()))
    for credential in ("pa55word-9", "tok-111", "tok-222"):
        assert credential not in everything
    assert verify_access_chain(AccessRecord.objects.order_by("seq")) is None
