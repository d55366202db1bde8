"""POST /api/events and a signed POST /api/events/webhook/{source} refuse a NUL character
(which PostgreSQL cannot store) in the event's id, its correlation key or its payload with
422 naming the field, and nothing is kept: never a 500 from the database."""

import json
import time

import pytest

from api.tokens import token_create
from runs.execution import executor
from runs.models import ExternalEvent, RunStatus
from runs.waiting import events
from tests.factories import new_run

pytestmark = pytest.mark.django_db
PAID = {"amount": 120, "reference": "PSP-77"}


def _body(key, **changes):
    return {"workflow": "test-payment-wait", "event": "payment.settled", "event_id": "e-1",
            "correlation_key": key, "payload": PAID, **changes}


@pytest.fixture
def post(client):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])

    def send(body):
        return client.post("/api/events", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    return send


@pytest.mark.parametrize("field", ["event_id", "correlation_key", "event", "workflow"])
def test_a_nul_in_a_field_of_the_event_is_refused_naming_the_field(post, field):
    response = post(_body("order-1", **{field: "a\x00b"}))
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [[field]]
    assert not ExternalEvent.objects.exists()


def test_a_nul_in_the_payload_of_an_event_to_keep_is_refused_naming_the_field(post):
    # No run waits for this key: the event would be kept for the run that will.
    response = post(_body("nobody-waits-yet", payload={**PAID, "reference": "PSP\x0077"}))
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"] == ["payload", "reference"]
    assert not ExternalEvent.objects.exists()


def test_a_nul_in_the_payload_of_an_awaited_event_is_refused_and_the_run_still_waits(
        post, script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    response = post(_body(run.business_key, payload={**PAID, "reference": "PSP\x0077"}))
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"] == ["payload", "reference"]
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and not ExternalEvent.objects.exists()


@pytest.mark.parametrize(("field", "value", "loc"), [
    ("event_id", "wh\x001", ["event_id"]),
    ("correlation_key", "order\x001", ["correlation_key"]),
    ("payload", {**PAID, "reference": "PSP\x0077"}, ["payload", "reference"]),
])
def test_a_signed_webhook_with_a_nul_is_refused_naming_the_field(client, settings, field,
                                                                  value, loc):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": "s3cret"}}
    body = json.dumps(_body("order-1", **{field: value})).encode()
    now = str(int(time.time()))
    response = client.post("/api/events/webhook/psp", body, content_type="application/json",
                           HTTP_X_EVENT_TIMESTAMP=now,
                           HTTP_X_EVENT_SIGNATURE=events.signature("s3cret", now, body))
    assert response.status_code == 422, response.content
    assert response.json()["errors"][0]["loc"] == loc
    assert not ExternalEvent.objects.exists()
