"""An event's source and id name one event. Sent again with the same payload (a retry after a
timeout) it is a duplicate and changes nothing; sent again with another payload (a sender
that "corrects" an amount under the same id) it is refused, naming the id, and nothing
changes: before, the sender was answered "duplicate" and believed its payload delivered,
while the run went on with the first one. The same holds whether the first was delivered to
its waiting run or kept for the run that will wait. So is one sent again for another
correlation key (a sender correcting a mistyped key): before, it was answered "duplicate"
and never reached the run it was meant for. An id holding control characters is refused
too: it is shown on the run's page and in log lines, where one would forge a line."""

import json

import pytest

from api.tokens import token_create
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import ExternalEvent, RunStatus, StepStatus
from runs.waiting import events
from runs.waiting.payloads import EventIdReused, EventRefused
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
PAID = {"amount": 120, "reference": "PSP-77"}
CORRECTED = {"amount": 210, "reference": "PSP-77"}


def _send(run, payload, *, event_id="evt-1", key=None):
    return events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                key=key or run.business_key, event_id=event_id, source="psp",
                                payload=payload, actor=Actor.system("payments"))


def test_an_id_delivered_then_sent_with_another_payload_is_refused_and_changes_nothing(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert _send(run, PAID).status == "delivered"
    records = AuditRecord.objects.filter(run=run).count()

    assert _send(run, dict(PAID)).status == "duplicate"  # the same payload: a retry
    with pytest.raises(EventIdReused, match="'evt-1' from 'psp' was received before with "
                                            "another payload"):
        _send(run, CORRECTED)

    event = ExternalEvent.objects.get()
    assert event.payload == PAID and event.consumed_run_id == run.pk
    waited = step(run, "payment")
    assert waited.status == StepStatus.SUCCEEDED and waited.result == PAID
    assert AuditRecord.objects.filter(run=run).count() == records


def test_an_id_kept_then_sent_with_another_payload_is_refused_and_the_first_stays_kept(script):
    run = new_run("test-payment-wait")  # not advanced: it does not wait yet
    kept = _send(run, PAID)
    assert kept.status == "kept"

    with pytest.raises(EventIdReused):
        _send(run, CORRECTED)
    assert _send(run, PAID).status == "duplicate"

    event = ExternalEvent.objects.get()
    assert event.payload == PAID and event.consumed_at is None
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    events.consume_kept_for_run(run.pk)
    assert step(run, "payment").result == PAID  # the run takes the first, as it came


def test_an_id_kept_for_a_mistyped_key_then_sent_for_the_runs_key_is_refused_naming_both(
        script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert _send(run, PAID, key="no-such-order").status == "kept"

    with pytest.raises(EventIdReused, match="received before with another correlation key "
                                            "\\('no-such-order', this one "):
        _send(run, PAID)

    event = ExternalEvent.objects.get()
    assert event.correlation_key == "no-such-order" and event.consumed_at is None
    assert step(run, "payment").status == StepStatus.WAITING
    # Under a new id, the event reaches the run.
    assert _send(run, PAID, event_id="evt-2").status == "delivered"


def test_a_payload_told_apart_only_by_a_secret_is_refused_and_leaves_no_hash_of_it(script):
    # The payload is stored redacted; the secret is compared by a keyed digest alone.
    run = new_run("test-payment-wait")
    assert _send(run, {**PAID, "api_key": "sk-first"}).status == "kept"
    with pytest.raises(EventIdReused, match="differ in a field kept redacted"):
        _send(run, {**PAID, "api_key": "sk-second"})
    assert _send(run, {**PAID, "api_key": "sk-first"}).status == "duplicate"
    event = ExternalEvent.objects.get()
    assert "sk-first" not in json.dumps([event.payload, event.payload_digest,
                                         event.payload_mac])


@pytest.mark.parametrize("event_id", ["evt-\x1b[2K1", "evt-\u202e1", "evt-\n1"])
def test_an_id_with_control_characters_is_refused_naming_it(script, event_id):
    run = new_run("test-payment-wait")
    with pytest.raises(EventRefused, match="event_id: contains control characters"):
        _send(run, PAID, event_id=event_id)
    assert not ExternalEvent.objects.exists()


def test_the_api_answers_an_id_reused_with_another_payload_409(client, script):
    run = new_run("test-payment-wait")
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])

    def post(payload):
        body = {"workflow": "test-payment-wait", "event": "payment.settled",
                "event_id": "e-1", "correlation_key": run.business_key, "payload": payload}
        return client.post("/api/events", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    assert post(PAID).status_code == 202
    assert post(PAID).status_code == 200
    answer = post(CORRECTED)
    assert answer.status_code == 409, answer.content
    assert answer.json()["error"] == "event_id_reused"
    assert "'e-1'" in answer.json()["detail"]
    assert ExternalEvent.objects.get().payload == PAID
