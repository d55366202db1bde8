"""An event's source and id name one event, its redacted fields included. Sent again with only
a redacted field changed (a password, an API key) it is refused with 409 naming the id, as
any other change is, and nothing is delivered or kept twice: before, the digest compared was
of the payload redacted, so the second was answered "duplicate" and the sender believed its
new values delivered. The row keeps no secret in clear nor a plain hash of it (a low-entropy
secret's sha256 is undone by trying each value): the whole payload is compared by an
HMAC-SHA256 with a key of RUNS_EVENT_DIGEST_KEYS, whose id the row keeps, so an event
received under an older key of the ring still compares. An event received before the keyed
digest (or under a key since removed from the ring) is compared by its redacted digest alone,
as it was when it came."""

import json

import pytest

from api.tokens import token_create
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine.transitions.kernel import input_hash
from runs.models import ExternalEvent, RunStatus, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
PAID = {"amount": 120, "reference": "PSP-77"}
PIN = "4711"
OLD_KEY, NEW_KEY = "e1", "e2"
RING = {NEW_KEY: "a-newer-event-digest-secret-" + "n" * 30,
        OLD_KEY: "an-older-event-digest-secret-" + "o" * 30}


@pytest.fixture
def post(client):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])

    def send(run, payload, *, event_id="e-1"):
        body = {"workflow": "test-payment-wait", "event": "payment.settled",
                "event_id": event_id, "correlation_key": run.business_key, "payload": payload}
        return client.post("/api/events", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    return send


def _received(run) -> int:
    return AuditRecord.objects.filter(run=run, action="event_received").count()


def test_a_delivered_id_sent_again_with_another_password_is_409_and_changes_nothing(post,
                                                                                      script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    first = post(run, {**PAID, "password": PIN})
    assert first.status_code == 202, first.content
    assert first.json()["status"] == "delivered"
    records = AuditRecord.objects.filter(run=run).count()

    again = post(run, {**PAID, "password": "4712"})

    assert again.status_code == 409, again.content
    assert again.json()["error"] == "event_id_reused"
    detail = again.json()["detail"]
    assert "'e-1'" in detail and "differ in a field kept redacted" in detail
    assert PIN not in detail and "4712" not in detail
    assert ExternalEvent.objects.count() == 1
    assert _received(run) == 1
    assert AuditRecord.objects.filter(run=run).count() == records
    waited = step(run, "payment")
    assert waited.status == StepStatus.SUCCEEDED and waited.result["amount"] == 120

    # The same payload again is a retry: a duplicate, as before, naming the run.
    same = post(run, {**PAID, "password": PIN})
    assert same.status_code == 200, same.content
    assert same.json() == {"status": "duplicate", "run_id": run.pk}
    assert ExternalEvent.objects.count() == 1 and _received(run) == 1


def test_a_kept_id_sent_again_with_another_api_key_is_409_and_the_first_stays_kept(post,
                                                                                   script):
    run = new_run("test-payment-wait")  # not advanced: it does not wait yet
    assert post(run, {**PAID, "api_key": "sk-first"}).json()["status"] == "kept"

    again = post(run, {**PAID, "api_key": "sk-second"})

    assert again.status_code == 409, again.content
    assert again.json()["error"] == "event_id_reused"
    assert post(run, {**PAID, "api_key": "sk-first"}).status_code == 200
    event = ExternalEvent.objects.get()
    assert event.consumed_at is None and event.payload["amount"] == 120


def test_the_stored_row_holds_no_secret_in_clear_nor_a_plain_hash_of_it(post, script):
    run = new_run("test-payment-wait")
    sent = {**PAID, "password": PIN}
    assert post(run, sent).status_code == 202

    row = ExternalEvent.objects.values().get()
    stored = json.dumps(row, default=str)
    assert PIN not in stored
    # A plain digest of the whole payload would give the PIN to whoever tries 10,000 values.
    assert input_hash(sent) not in stored
    assert row["payload_mac"].startswith("dev:") and len(row["payload_mac"]) == 4 + 64


def test_an_event_received_under_an_older_key_of_the_ring_is_still_compared(post, script,
                                                                            settings):
    run = new_run("test-payment-wait")
    settings.RUNS_EVENT_DIGEST_KEYS = {OLD_KEY: RING[OLD_KEY]}
    assert post(run, {**PAID, "password": PIN}).status_code == 202
    assert ExternalEvent.objects.get().payload_mac.startswith(f"{OLD_KEY}:")

    settings.RUNS_EVENT_DIGEST_KEYS = RING  # rotated: the new key first, the old one kept
    assert post(run, {**PAID, "password": PIN}).status_code == 200
    assert post(run, {**PAID, "password": "0000"}).status_code == 409
    # A new event is digested under the key in use.
    assert post(run, {**PAID, "password": PIN}, event_id="e-2").status_code == 202
    assert ExternalEvent.objects.get(event_id="e-2").payload_mac.startswith(f"{NEW_KEY}:")

    # The old key removed: what it digested is compared by the redacted payload alone, so a
    # retry is still a duplicate (and another amount still refused), never a 409 for a retry.
    settings.RUNS_EVENT_DIGEST_KEYS = {NEW_KEY: RING[NEW_KEY]}
    assert post(run, {**PAID, "password": PIN}).status_code == 200
    assert post(run, {**PAID, "amount": 121, "password": PIN}).status_code == 409
    assert ExternalEvent.objects.count() == 2


def test_an_event_received_before_the_keyed_digest_is_compared_as_it_was(post, script):
    run = new_run("test-payment-wait")
    assert post(run, {**PAID, "password": PIN}).status_code == 202
    ExternalEvent.objects.update(payload_mac="")  # as a row written by the release before

    assert post(run, {**PAID, "password": PIN}).status_code == 200
    assert post(run, {**PAID, "password": "0000"}).status_code == 200  # what it could tell
    assert post(run, {**PAID, "amount": 121, "password": PIN}).status_code == 409
    assert ExternalEvent.objects.count() == 1
