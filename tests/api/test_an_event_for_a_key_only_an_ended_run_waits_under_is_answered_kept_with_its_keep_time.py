"""An event for a key that a wait's own correlate() gives, where the only run waiting under
it was ended by a person, is answered as any event no run takes yet: 202, kept, until
keep_until (the key names no run: another run may still reach the wait). A redelivery is
answered 200, duplicate, with the same keep time."""

import json
from datetime import timedelta

import pytest
from django.utils.dateparse import parse_datetime

from api.tokens import token_create
from audit.chain import Actor
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.machine import transitions
from runs.models import ExternalEvent, RunStatus
from tests.factories import new_run
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db
FLOW = "test-api-one-key-ended"


@pytest.fixture
def one_key_for_all():
    flow = Workflow(FLOW, version=1, input=OrderIn)
    flow.wait_for_event("paid", event="customer.paid", correlate=lambda data: "customer-4",
                        timeout=timedelta(hours=1), on_timeout="fail")
    yield flow
    registry.unregister(flow)


def test_the_sender_is_told_kept_until_when(client, one_key_for_all):
    run = new_run(FLOW)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    transitions.terminate(run.pk, actor=Actor(kind="user", label="olga"), reason="duplicate")
    _, token = token_create(name="psp", workflows=[FLOW])
    body = json.dumps({"workflow": FLOW, "event": "customer.paid", "event_id": "e-1",
                       "correlation_key": "customer-4", "payload": {}})

    def post():
        return client.post("/api/events", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")

    first, again = post(), post()

    row = ExternalEvent.objects.get()
    assert (row.consumed_at, row.refused_at) == (None, None)
    assert first.status_code == 202, first.content
    assert (first.json()["status"], first.json()["run_id"]) == ("kept", None)
    # JSON carries times to the millisecond.
    assert abs(parse_datetime(first.json()["keep_until"]) - row.keep_until) < timedelta(
        milliseconds=1)
    assert again.status_code == 200, again.content
    assert again.json() == {**first.json(), "status": "duplicate"}
