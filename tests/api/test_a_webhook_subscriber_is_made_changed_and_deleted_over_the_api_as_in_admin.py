"""An integrator manages webhook subscribers over the API, without Django admin: made,
listed, read, changed and deleted by the token's acting person, through the functions admin
uses (api.subscribers), each change recorded in the access chain naming that person. A new
secret starts the overlap admin's save starts: the replaced one signs beside it until the
time the answer gives. The secret is write-only: in no answer, no access record and no log
line, and a credential the URL carries is answered masked."""

import json
import logging
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from guardian.shortcuts import assign_perm

from api.models import WebhookSubscriber
from api.subscribers import signing_secret, signing_secrets
from api.tokens import token_create
from audit.models import AccessRecord
from audit.redaction import REDACTED
from runs.machine import sensitive
from runs.models import Workflow

pytestmark = pytest.mark.django_db

FIRST, SECOND = "whsec-first-4711-only-the-receiver", "whsec-second-0815-rolled-out"
URL = "https://hooks.example.com/in?token=url-credential-99"


def keeper_with(*codenames: str) -> User:
    """A person with the given webhook subscriber permissions, who may view the runs of
    test-orders and test-saga."""
    person = User.objects.create_user("keeper")
    person.user_permissions.add(*Permission.objects.filter(
        content_type__app_label="api",
        codename__in=[f"{c}_webhooksubscriber" for c in codenames]))
    for name in ("test-orders", "test-saga"):
        assign_perm("runs.view_runs", person, Workflow.objects.get_or_create(name=name)[0])
    return person


@pytest.fixture
def keeper(client):
    person = keeper_with("view", "add", "change", "delete")
    _, plaintext = token_create(name="erp", workflows=["test-orders", "test-saga"],
                                acting_user=person)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    return person


def send(client, method: str, path: str, body=None):
    return client.generic(method, path, json.dumps(body) if body is not None else "",
                          content_type="application/json")


def records(action: str) -> list[AccessRecord]:
    return list(AccessRecord.objects.filter(action=action).order_by("seq"))


def test_a_subscriber_is_made_listed_read_changed_and_deleted_each_recorded_without_its_secret(
        client, keeper, caplog, settings):
    settings.WEBHOOK_SECRET_OVERLAP_HOURS = 24
    caplog.set_level(logging.DEBUG)
    answers = []

    made = send(client, "POST", "/api/subscribers", {
        "name": "erp", "url": URL, "secret": FIRST, "workflows": ["test-orders"]})
    answers.append(made)
    assert made.status_code == 201, made.content
    subscriber = WebhookSubscriber.objects.get(name="erp")
    assert made.json() == {
        "id": subscriber.pk, "name": "erp", "url": f"https://hooks.example.com/in?token={REDACTED}",
        "workflows": ["test-orders"], "active": True, "previous_secret_signs_until": None,
        "created_at": made.json()["created_at"]}
    # Stored sealed, as admin stores it, and it signs.
    assert sensitive.is_sealed(subscriber.secret) and signing_secret(subscriber) == FIRST
    [created] = records("webhook_subscriber_created")
    assert created.actor_label == "keeper" and created.actor_user_id == keeper.pk
    assert created.subject == "webhook subscriber erp"
    assert created.after["workflows"] == ["test-orders"] and created.after["active"] is True

    listed = send(client, "GET", "/api/subscribers")
    answers.append(listed)
    assert listed.status_code == 200
    assert [s["name"] for s in listed.json()["subscribers"]] == ["erp"]
    read = send(client, "GET", f"/api/subscribers/{subscriber.pk}")
    answers.append(read)
    assert read.status_code == 200 and read.json() == made.json()

    before_change = timezone.now()
    changed = send(client, "PATCH", f"/api/subscribers/{subscriber.pk}",
                   {"secret": SECOND, "workflows": ["test-orders", "test-saga"],
                    "active": False})
    answers.append(changed)
    assert changed.status_code == 200, changed.content
    body = changed.json()
    assert body["workflows"] == ["test-orders", "test-saga"] and body["active"] is False
    answered_until = timezone.datetime.fromisoformat(body["previous_secret_signs_until"])
    subscriber.refresh_from_db()
    until = subscriber.previous_secret_until
    assert before_change + timedelta(hours=24) <= until <= timezone.now() + timedelta(hours=24)
    # Answered to the millisecond, as every time of the API: never later than it is.
    assert timedelta(0) <= until - answered_until < timedelta(milliseconds=1)
    # The overlap admin's save starts: the new secret signs first, the replaced one beside.
    assert signing_secrets(subscriber, now=timezone.now()) == [SECOND, FIRST]
    [change] = records("webhook_subscriber_changed")
    assert change.actor_label == "keeper"
    assert change.before["secret"] == "(not recorded)"
    assert change.after["secret"] == "replaced (not recorded)"
    assert change.after["previous_secret_signs_until"] == until.isoformat()
    assert change.before["active"] is True and change.after["active"] is False

    deleted = send(client, "DELETE", f"/api/subscribers/{subscriber.pk}")
    answers.append(deleted)
    assert deleted.status_code == 200, deleted.content
    assert deleted.json()["name"] == "erp"
    assert not WebhookSubscriber.objects.exists()
    [gone] = records("webhook_subscriber_deleted")
    assert gone.actor_label == "keeper" and gone.before["workflows"] == ["test-orders",
                                                                         "test-saga"]
    assert send(client, "GET", f"/api/subscribers/{subscriber.pk}").status_code == 404

    stored_records = json.dumps([[r.before, r.after, r.reason, r.subject]
                                 for r in AccessRecord.objects.all()])
    for secret in (FIRST, SECOND, "url-credential-99"):
        assert all(secret not in a.content.decode() for a in answers), secret
        assert secret not in stored_records, secret
        assert secret not in caplog.text, secret


def test_a_change_of_one_field_leaves_the_others_and_their_secret(client, keeper):
    made = send(client, "POST", "/api/subscribers", {
        "name": "erp", "url": "https://hooks.example.com/in", "secret": FIRST,
        "workflows": ["test-orders"]}).json()

    changed = send(client, "PATCH", f"/api/subscribers/{made['id']}", {"active": False})

    assert changed.status_code == 200
    assert changed.json() == {**made, "active": False}
    subscriber = WebhookSubscriber.objects.get(pk=made["id"])
    assert signing_secrets(subscriber, now=timezone.now()) == [FIRST]
    [change] = records("webhook_subscriber_changed")
    assert change.before == {"active": True} and change.after == {"active": False}


def test_a_leaked_secret_replaced_with_end_overlap_stops_signing_at_once(client, keeper):
    made = send(client, "POST", "/api/subscribers", {
        "name": "erp", "url": "https://hooks.example.com/in", "secret": FIRST,
        "workflows": ["test-orders"]}).json()

    changed = send(client, "PATCH", f"/api/subscribers/{made['id']}",
                   {"secret": SECOND, "end_overlap": True})

    assert changed.status_code == 200
    assert changed.json()["previous_secret_signs_until"] is None
    subscriber = WebhookSubscriber.objects.get(pk=made["id"])
    assert signing_secrets(subscriber, now=timezone.now()) == [SECOND]
