"""POST /api/events and POST /api/events/webhook/{source} at their limits: never a 500.

- A token's name, and a webhook source's, may be as long as their columns (100): the
  event's source ("api-token:<name>", "webhook:<source>") is made to fit ExternalEvent's
  column, the same way every time (a redelivery is a duplicate) and differently for two
  tokens (one's events are never taken for the other's).
- A payload nested deeper than MAX_PAYLOAD_DEPTH is refused with 422 naming the problem,
  before anything walks it: nothing is kept and the waiting run does not move.
"""

import json
import time
from datetime import timedelta

import pytest

from api.tokens import token_create
from audit.models import AuditRecord
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import ExternalEvent, RunStatus, StepStatus
from runs.waiting import events
from tests.factories import new_run, step
from tests.workflows import FAST, OrderIn, scripted_call

pytestmark = pytest.mark.django_db
PAID = {"amount": 120, "reference": "PSP-77"}


def _body(key, **changes):
    return {"workflow": "test-payment-wait", "event": "payment.settled", "event_id": "e-1",
            "correlation_key": key, "payload": PAID, **changes}


def _post(client, body, plaintext):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post("/api/events", data, content_type="application/json",
                       HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def _waiting(workflow="test-payment-wait"):
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


@pytest.fixture
def no_schema():
    """A workflow whose wait takes any payload as it is (nothing checks its shape)."""
    workflow = Workflow("test-any-payload", version=1, input=OrderIn)
    workflow.wait_for_event("payment", event="paid", timeout=timedelta(hours=1))

    @workflow.read("book", retry=FAST)
    def book(ctx):
        return scripted_call(ctx, lambda: {"paid": ctx.results.get("payment")})

    yield workflow
    registry.unregister(workflow)


# --- long token names and webhook sources ---------------------------------------------------

def test_a_token_with_the_longest_name_delivers_its_event(client, script):
    run = _waiting()
    name = "p" * 100
    _, plaintext = token_create(name=name, workflows=["test-payment-wait"])
    response = _post(client, _body(run.business_key), plaintext)
    assert response.status_code == 202, response.content
    assert response.json() == {"status": "delivered", "run_id": run.pk}
    stored = ExternalEvent.objects.get()
    assert len(stored.source) <= 100 and stored.source.startswith("api-token:ppp")
    assert step(run, "payment").status == StepStatus.SUCCEEDED
    # The audit record names the token in full.
    assert AuditRecord.objects.filter(run=run, action="event_received",
                                      actor_label=f"api-token:{name}").exists()
    # Sent again: the same source, so a duplicate that changes nothing.
    again = _post(client, _body(run.business_key), plaintext)
    assert again.status_code == 200, again.content
    assert again.json()["status"] == "duplicate"
    assert ExternalEvent.objects.count() == 1


def test_two_tokens_with_long_names_alike_keep_their_events_apart(client):
    _, first = token_create(name="p" * 100, workflows=["test-payment-wait"])
    _, second = token_create(name="p" * 99 + "q", workflows=["test-payment-wait"])
    for plaintext in (first, second):
        response = _post(client, _body("nobody-waits-yet"), plaintext)
        assert response.status_code == 202, response.content
        assert response.json()["status"] == "kept"
    sources = list(ExternalEvent.objects.values_list("source", flat=True))
    assert len(set(sources)) == 2 and all(len(s) <= 100 for s in sources)


def test_a_webhook_source_with_the_longest_name_delivers_its_event(client, settings, script):
    run = _waiting()
    source = "s" * 100
    settings.RUNS_EVENT_SOURCES = {source: {"secret": "s3cret"}}
    body = json.dumps(_body(run.business_key)).encode()
    now = str(int(time.time()))
    response = client.post(f"/api/events/webhook/{source}", body,
                           content_type="application/json", HTTP_X_EVENT_TIMESTAMP=now,
                           HTTP_X_EVENT_SIGNATURE=events.signature("s3cret", now, body))
    assert response.status_code == 202, response.content
    assert response.json() == {"status": "delivered", "run_id": run.pk}
    stored = ExternalEvent.objects.get()
    assert len(stored.source) <= 100 and stored.source.startswith("webhook:sss")


# --- payloads nested too deep ---------------------------------------------------------------

def _nested(depth: int) -> str:
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


# Deeper still, the JSON parser itself may give up first (how deep depends on the process's
# stack): test_a_payload_nested_deeper_than_the_parser_goes_is_no_500.
@pytest.mark.parametrize("depth", [events.MAX_PAYLOAD_DEPTH + 1, 300])
def test_a_payload_nested_too_deep_is_refused_and_the_waiting_run_does_not_move(
        client, script, no_schema, depth):
    run = _waiting("test-any-payload")
    audits = AuditRecord.objects.filter(run=run).count()
    _, plaintext = token_create(name="psp", workflows=["test-any-payload"])
    body = ('{"workflow": "test-any-payload", "event": "paid", "event_id": "e-1", '
            f'"correlation_key": "{run.business_key}", "payload": {_nested(depth)}}}')
    response = _post(client, body, plaintext)
    assert response.status_code == 422, response.content
    assert "nested deeper than" in response.json()["detail"]
    assert response.json()["errors"][0]["loc"] == ["payload"]
    assert not ExternalEvent.objects.exists()
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert step(run, "payment").status == StepStatus.WAITING
    assert AuditRecord.objects.filter(run=run).count() == audits


def test_a_payload_nested_deeper_than_the_parser_goes_is_no_500(client, no_schema):
    _, plaintext = token_create(name="psp", workflows=["test-any-payload"])
    body = ('{"workflow": "test-any-payload", "event": "paid", "event_id": "e-1", '
            f'"correlation_key": "k", "payload": {_nested(5000)}}}')
    client.raise_request_exception = False
    response = _post(client, body, plaintext)
    assert 400 <= response.status_code < 500, response.content
    assert not ExternalEvent.objects.exists()


def test_a_payload_as_deep_as_allowed_is_delivered(client, script, no_schema):
    run = _waiting("test-any-payload")
    _, plaintext = token_create(name="psp", workflows=["test-any-payload"])
    body = ('{"workflow": "test-any-payload", "event": "paid", "event_id": "e-1", '
            f'"correlation_key": "{run.business_key}", '
            f'"payload": {_nested(events.MAX_PAYLOAD_DEPTH)}}}')
    response = _post(client, body, plaintext)
    assert response.status_code == 202, response.content
    assert step(run, "payment").status == StepStatus.SUCCEEDED
