"""The door's answer to an event no run waits for yet (202, status kept) says until when it
is kept (keep_until: RUNS_EVENT_KEEP_SECONDS after it came, by the database's clock), and so
does the answer to its redelivery (200, duplicate); once expired, that time lies in the past.
A delivered event's answer carries no keep time, and the event never expires."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from api.tokens import token_create
from runs.execution import executor, sweeper
from runs.models import ExternalEvent, RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db
PAID = {"amount": 120, "reference": "PSP-77"}


@pytest.fixture
def post(client):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])

    def send(key, event_id="e-1"):
        body = {"workflow": "test-payment-wait", "event": "payment.settled",
                "event_id": event_id, "correlation_key": key, "payload": PAID}
        return client.post("/api/events", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    return send


def test_a_kept_event_is_answered_with_until_when_it_is_kept(post, script):
    run = new_run("test-payment-wait")
    answer = post(run.business_key)
    assert answer.status_code == 202, answer.content
    body = answer.json()
    assert (body["status"], body["run_id"]) == ("kept", None)
    kept = ExternalEvent.objects.get()
    assert kept.keep_until == kept.received_at + timedelta(days=7)
    assert _same_time(body["keep_until"], kept.keep_until)

    again = post(run.business_key)
    assert again.status_code == 200
    assert again.json()["status"] == "duplicate"
    assert _same_time(again.json()["keep_until"], kept.keep_until)


def _same_time(text: str, when) -> bool:
    # JSON carries times to the millisecond.
    return abs(parse_datetime(text) - when) < timedelta(milliseconds=1)


def test_a_redelivery_of_an_expired_event_says_its_time_has_passed(post, script):
    run = new_run("test-payment-wait")
    post(run.business_key)
    ExternalEvent.objects.update(keep_until=timezone.now() - timedelta(minutes=1))
    assert sweeper.sweep().events_expired == 1

    again = post(run.business_key)
    assert again.json()["status"] == "duplicate"
    assert parse_datetime(again.json()["keep_until"]) < timezone.now()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING


def test_a_delivered_event_has_no_keep_time_and_never_expires(post, script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    answer = post(run.business_key)
    assert answer.status_code == 202
    assert answer.json() == {"status": "delivered", "run_id": run.pk}
    ExternalEvent.objects.update(keep_until=timezone.now() - timedelta(minutes=1))

    assert sweeper.sweep().events_expired == 0
    assert ExternalEvent.objects.get().state == "delivered"
    assert post(run.business_key).json() == {"status": "duplicate", "run_id": run.pk}


def test_the_answers_schema_documents_keep_until(client):
    schema = client.get("/api/openapi.json").json()
    receipt = schema["components"]["schemas"]["EventReceipt"]["properties"]["keep_until"]
    assert "RUNS_EVENT_KEEP_SECONDS" in receipt["description"]
    assert "expires" in receipt["description"]
