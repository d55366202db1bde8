"""A person's save of a webhook subscriber (Django admin's page, the API's change) writes what
that person changed, never the rest of the copy their page or lookup read. The publisher
moves the subscriber's cursors as it queues deliveries; a save of a copy read before that
pass wrote the old cursors back, and the next pass queued the same status changes and step
outcomes again (each delivery a duplicate to its receiver). A field another person changed
meanwhile is kept the same way.

At the function both doors call (api.subscribers.subscriber_save) the sequence is made in
order: the copy read, the publisher's real pass, the copy saved. Through the doors the
interleaving is made with locks, not hoped for: another session holds the row FOR KEY SHARE;
the door's save reads the row and waits for it (FOR UPDATE), while the publisher's pass,
which takes no lock that one conflicts with, commits its cursors; the row is let go, and the
save takes it after the pass."""

import json
import threading
import time

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from api import webhook_cursors
from api.models import WebhookDelivery, WebhookSubscriber
from api.subscribers import EDITABLE, subscriber_create, subscriber_save
from api.tokens import token_create
from audit.access import AccessAction
from audit.models import AccessRecord
from tests.factories import new_run

SECRET = "whsec-4711-typed-by-an-admin"
URL = "https://erp.example.com/hook"
NEW_URL = "https://erp.example.com/hook-v2"


def publishers_fields(subscriber: WebhookSubscriber) -> dict:
    """What of the subscriber's row is not a person's to change: the publisher's cursors and
    their holes, the replaced secret's overlap."""
    return {field.attname: getattr(subscriber, field.attname)
            for field in WebhookSubscriber._meta.concrete_fields
            if field.attname not in (*EDITABLE, "id", "name", "created_at")}


def made(root) -> WebhookSubscriber:
    subscriber = WebhookSubscriber(name="erp", url=URL, secret=SECRET,
                                   workflows=["test-orders"])
    subscriber_create(subscriber, by=root)
    return WebhookSubscriber.objects.get(pk=subscriber.pk)


def the_publisher_moves_on() -> WebhookSubscriber:
    """Two runs started, and the publisher's real pass queueing their deliveries; the row
    as that pass left it."""
    for _ in range(2):
        new_run("test-orders")
    assert webhook_cursors.queue_deliveries() > 0
    return WebhookSubscriber.objects.get(name="erp")


@pytest.mark.django_db
def test_a_copy_read_before_a_publish_pass_and_saved_after_it_sets_no_cursor_back():
    root = User.objects.create_superuser("root")
    page = made(root)  # what admin's page, or the API's lookup, read
    moved = the_publisher_moves_on()
    # Its cursors, or where its rows are queued through while a transaction open elsewhere
    # on the server holds the cursors at a hole (webhook_cursors.CursorState).
    assert publishers_fields(moved) != publishers_fields(page)
    queued = WebhookDelivery.objects.count()

    page.url = NEW_URL
    subscriber_save(page, by=root, changed=["url"])

    stored = WebhookSubscriber.objects.get(pk=page.pk)
    assert stored.url == NEW_URL  # the person's change is saved
    assert publishers_fields(stored) == publishers_fields(moved)
    # The copy handed in ends as the row: nothing older in it is shown or used after.
    assert publishers_fields(page) == publishers_fields(moved)
    # Nothing queued again: the next pass finds nothing new for it.
    assert webhook_cursors.queue_deliveries() == 0
    assert WebhookDelivery.objects.count() == queued
    (changed,) = AccessRecord.objects.filter(action=AccessAction.WEBHOOK_SUBSCRIBER_CHANGED)
    assert (changed.before, changed.after) == ({"url": URL}, {"url": NEW_URL})


@pytest.mark.django_db
def test_a_field_another_person_changed_meanwhile_is_kept():
    root = User.objects.create_superuser("root")
    page = made(root)
    other = WebhookSubscriber.objects.get(pk=page.pk)
    other.active = False
    subscriber_save(other, by=root, changed=["active"])

    page.workflows = ["test-orders", "test-saga"]
    subscriber_save(page, by=root, changed=["workflows"])

    stored = WebhookSubscriber.objects.get(pk=page.pk)
    assert stored.workflows == ["test-orders", "test-saga"]
    assert stored.active is False  # not set back to what the first page read
    assert page.active is False
    records = AccessRecord.objects.filter(action=AccessAction.WEBHOOK_SUBSCRIBER_CHANGED) \
        .order_by("pk")
    assert [(r.before, r.after) for r in records] == [
        ({"active": True}, {"active": False}),
        ({"workflows": ["test-orders"]}, {"workflows": ["test-orders", "test-saga"]})]


def session(*, autocommit: bool = False) -> psycopg.Connection:
    s = connection.settings_dict
    return psycopg.connect(host=s["HOST"], port=s["PORT"] or 5432, user=s["USER"],
                           password=s["PASSWORD"] or None, dbname=s["NAME"],
                           autocommit=autocommit)


def waiting_on_a_lock(sessions: int) -> None:
    """Return once `sessions` sessions wait on a lock (each thread reached the row)."""
    deadline = time.monotonic() + 60
    with session(autocommit=True) as probe:
        while time.monotonic() < deadline:
            waiting = probe.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                    "wait_event_type = 'Lock' AND datname = %s",
                                    [connection.settings_dict["NAME"]]).fetchone()[0]
            if waiting >= sessions:
                return
            time.sleep(0.02)
    raise AssertionError(f"{sessions} session(s) never waited on the subscriber's row")


def admin_moves_it(subscriber: WebhookSubscriber, root: User):
    """The admin's save, to be sent: the change page's form with a new URL, its secret
    field left empty, the rest as the page showed it."""
    client = Client()
    client.force_login(root)
    return lambda: client.post(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/", {
        "name": subscriber.name, "url": NEW_URL, "secret": "",
        "workflows": json.dumps(subscriber.workflows), "active": "on"})


def api_moves_it(subscriber: WebhookSubscriber, root: User):
    """The API's change, to be sent: a new URL, nothing else given."""
    _, plaintext = token_create(name="erp-token", workflows=["test-orders"], acting_user=root)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return lambda: client.patch(f"/api/subscribers/{subscriber.pk}",
                                json.dumps({"url": NEW_URL}),
                                content_type="application/json")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("save", [admin_moves_it, api_moves_it], ids=["admin", "api"])
def test_a_door_saving_as_a_publish_pass_commits_sets_no_cursor_back(save):
    root = User.objects.create_superuser("root")
    subscriber = made(root)
    for _ in range(2):
        new_run("test-orders")
    send_save = save(subscriber, root)
    outcome = {}

    def saving():
        try:
            outcome["save"] = send_save()
        except Exception as exc:  # what the thread ended in, asserted below
            outcome["save"] = exc
        finally:
            connection.close()

    holder = session()
    holder.execute("SELECT id FROM api_webhooksubscriber WHERE id = %s FOR KEY SHARE",
                   [subscriber.pk])
    try:
        thread = threading.Thread(target=saving, daemon=True)
        thread.start()
        # The save read the row (the cursors where the subscriber was made) and waits.
        waiting_on_a_lock(1)
        assert webhook_cursors.queue_deliveries() > 0
        moved = WebhookSubscriber.objects.get(pk=subscriber.pk)
        # Where its rows are queued through, at least: the holder's open transaction may
        # hold the cursors themselves at a hole (webhook_cursors.CursorState).
        assert publishers_fields(moved) != publishers_fields(subscriber)
    finally:
        holder.commit()
        holder.close()
    thread.join(60)

    response = outcome["save"]
    assert not isinstance(response, Exception), response
    assert response.status_code in (200, 302), response.content
    stored = WebhookSubscriber.objects.get(pk=subscriber.pk)
    assert stored.url == NEW_URL and stored.active
    assert publishers_fields(stored) == publishers_fields(moved)
    assert webhook_cursors.queue_deliveries() == 0
    (changed,) = AccessRecord.objects.filter(action=AccessAction.WEBHOOK_SUBSCRIBER_CHANGED)
    assert (changed.before, changed.after) == ({"url": URL}, {"url": NEW_URL})
