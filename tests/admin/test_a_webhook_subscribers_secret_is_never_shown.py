"""A webhook subscriber's signing secret is typed, never shown again: not on its page (to a
superuser or to staff who may only view), nor in the list; an empty field keeps it. The
credentials a URL may carry are shown masked to those who may only view, as the access
chain records them."""

import pytest
from django.contrib.auth.models import Permission, User

from api.models import WebhookSubscriber
from api.subscribers import signing_secret
from audit.models import AccessRecord

from .test_admin_lists import admin_client  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db

SECRET = "whsec-4711-do-not-show-0815"
URL = "https://hooks:pa55word@erp.example.com/hook?token=tok-4711"
NEW = "whsec-new-0815-rolled-out"


@pytest.fixture
def subscriber():
    return WebhookSubscriber.objects.create(name="erp", url=URL, secret=SECRET)


@pytest.fixture
def viewer_client(client):
    viewer = User.objects.create_user("viewer", password="x", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename="view_webhooksubscriber"))
    client.force_login(viewer)
    return client


def test_a_superuser_sees_no_secret_on_the_page_or_in_the_list(admin_client,  # noqa: F811
                                                                subscriber):
    page = admin_client.get(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/")
    listing = admin_client.get("/admin/api/webhooksubscriber/")
    assert page.status_code == listing.status_code == 200
    assert SECRET not in page.text and SECRET not in listing.text
    assert "27 characters, sha256 " in page.text
    assert "pa55word" not in listing.text and "tok-4711" not in listing.text


def test_staff_who_may_only_view_see_no_secret_and_no_credential_of_the_url(viewer_client,
                                                                             subscriber):
    page = viewer_client.get(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/")
    listing = viewer_client.get("/admin/api/webhooksubscriber/")
    assert page.status_code == listing.status_code == 200
    for shown in (page.text, listing.text):
        assert SECRET not in shown
        assert "pa55word" not in shown and "tok-4711" not in shown
    assert "erp.example.com/hook" in page.text and "27 characters, sha256 " in page.text


def test_an_empty_secret_keeps_the_secret_and_records_no_change(admin_client,  # noqa: F811
                                                                 subscriber):
    response = admin_client.post(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/", {
        "name": "erp", "url": URL, "secret": "", "workflows": "[]", "active": "on"})
    assert response.status_code == 302
    subscriber.refresh_from_db()
    assert signing_secret(subscriber) == SECRET and SECRET not in subscriber.secret
    assert not AccessRecord.objects.exists()


def test_a_typed_secret_replaces_it(admin_client, subscriber):  # noqa: F811
    response = admin_client.post(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/", {
        "name": "erp", "url": URL, "secret": NEW, "workflows": "[]", "active": "on"})
    assert response.status_code == 302
    subscriber.refresh_from_db()
    assert signing_secret(subscriber) == NEW and NEW not in subscriber.secret
    assert AccessRecord.objects.get().after == {
        "secret": "replaced (not recorded)",
        "previous_secret_signs_until": subscriber.previous_secret_until.isoformat()}


def test_a_new_subscriber_without_a_secret_is_refused_and_nothing_is_saved(
        admin_client):  # noqa: F811
    response = admin_client.post("/admin/api/webhooksubscriber/add/", {
        "name": "crm", "url": "https://crm.example.com/hook", "secret": "",
        "workflows": "[]", "active": "on"})
    assert response.status_code == 200
    assert "needs a secret to sign its deliveries with" in response.text
    assert not WebhookSubscriber.objects.exists() and not AccessRecord.objects.exists()
