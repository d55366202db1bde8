"""A webhook subscriber saved with its secret kept (admin's secret field left empty, the API's
left out) while `reseal_fields` seals that secret again under the key in use: the save kept
the secret as its page or lookup had read it, before the row's lock, and wrote back the
ciphertext of the key being retired once the reseal had committed. The subscriber's
deliveries went on signing only while that key stayed in the ring. A kept secret is the
row's as read under the save's lock: it ends sealed under the new key and opens to the
secret typed at first.

The interleaving is made, not hoped for: another session holds the subscriber's row; the
reseal waits for it, then the save reads the row and waits behind the reseal; the row is let
go, the reseal commits, and the save takes the row after it."""

import json
import threading
import time

import psycopg
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from api.models import WebhookSubscriber
from api.subscribers import signing_secret, subscriber_create
from api.tokens import token_create
from audit.access import AccessAction
from audit.chain import Actor
from audit.models import AccessRecord
from runs.machine import sensitive
from runs.operator.field_keys import reseal_fields

pytestmark = pytest.mark.django_db(transaction=True)

OLD, NEW = "k-old", "k-new"
KEYS = {OLD: "A" * 43 + "=", NEW: "B" * 43 + "="}
SECRET = "whsec-4711-typed-by-an-admin"


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


def admin_deactivates(subscriber: WebhookSubscriber, root: User):
    """The admin's save, to be sent: the change page's form, its secret field left empty."""
    client = Client()
    client.force_login(root)
    return lambda: client.post(f"/admin/api/webhooksubscriber/{subscriber.pk}/change/", {
        "name": subscriber.name, "url": subscriber.url, "secret": "",
        "workflows": json.dumps(subscriber.workflows)})


def api_deactivates(subscriber: WebhookSubscriber, root: User):
    """The API's change, to be sent: its secret left out."""
    _, plaintext = token_create(name="erp-token", workflows=["test-orders"], acting_user=root)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return lambda: client.patch(f"/api/subscribers/{subscriber.pk}",
                                json.dumps({"active": False}),
                                content_type="application/json")


@pytest.mark.parametrize("save", [admin_deactivates, api_deactivates],
                         ids=["admin", "api"])
def test_the_secret_kept_ends_sealed_under_the_new_key_and_opens_to_the_one_typed(
        settings, save):
    settings.FIELD_ENCRYPTION_KEYS = {OLD: KEYS[OLD]}
    root = User.objects.create_superuser("root")
    subscriber = WebhookSubscriber(name="erp", url="https://erp.example.com/hook",
                                   secret=SECRET, workflows=["test-orders"])
    subscriber_create(subscriber, by=root)
    assert sensitive.key_of(WebhookSubscriber.objects.get(pk=subscriber.pk).secret) == OLD
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW], OLD: KEYS[OLD]}
    send_save = save(subscriber, root)
    outcome = {}

    def in_thread(name, work):
        def run():
            try:
                outcome[name] = work()
            except Exception as exc:  # what the thread ended in, asserted below
                outcome[name] = exc
            finally:
                connection.close()
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    holder = session()
    holder.execute("SELECT id FROM api_webhooksubscriber WHERE id = %s FOR UPDATE",
                   [subscriber.pk])
    try:
        resealing = in_thread("reseal", lambda: reseal_fields(
            reason="k-old rotated on schedule", actor=Actor.system("test")))
        waiting_on_a_lock(1)
        saving = in_thread("save", send_save)
        # The save read the row (its secret sealed under the old key) and waits behind the
        # reseal for it.
        waiting_on_a_lock(2)
    finally:
        holder.commit()
        holder.close()
    resealing.join(60)
    saving.join(60)

    counts = outcome["reseal"]
    assert not isinstance(counts, Exception), counts
    assert counts.other_rows == {"webhook subscribers": 1}
    response = outcome["save"]
    assert not isinstance(response, Exception), response
    assert response.status_code in (200, 302), response.content
    stored = WebhookSubscriber.objects.get(pk=subscriber.pk)
    assert not stored.active  # the save's own change is kept
    assert sensitive.key_of(stored.secret) == NEW
    settings.FIELD_ENCRYPTION_KEYS = {NEW: KEYS[NEW]}  # the old key leaves the ring
    assert signing_secret(stored) == SECRET
    # Kept, not replaced: no overlap begun, no replacement recorded.
    assert stored.previous_secret == "" and stored.previous_secret_until is None
    (changed,) = AccessRecord.objects.filter(action=AccessAction.WEBHOOK_SUBSCRIBER_CHANGED)
    assert (changed.before, changed.after) == ({"active": True}, {"active": False})
    assert AccessRecord.objects.filter(action=AccessAction.FIELDS_RESEALED).count() == 1
