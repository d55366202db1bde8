"""GET /api/runs/{id} of a run at a sleep step or an event wait: the current step's kind is
one the document declares (every kind the runtime has), and `waiting_for` says whether the
run waits for a timer or an external event, not for a retry."""

import pytest

from runs.definitions.definition import STEP_KINDS
from runs.execution import executor
from runs.models import RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def client_waits(client, make_token):
    _, plaintext = make_token("waits", workflows=["test-sleepy", "test-payment-wait"])
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    return client


def _waiting_state(client, workflow):
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    response = client.get(f"/api/runs/{run.pk}")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_sleeping_run_says_it_waits_for_a_timer(client_waits, script):
    body = _waiting_state(client_waits, "test-sleepy")
    assert body["current_step"]["kind"] == "sleep"
    assert (body["state"], body["waiting_for"]) == ("waiting", "timer")
    assert body["current_step"]["next_attempt_at"] is not None  # when it wakes
    assert body["description"] == "waiting for a timer at step 2 of 3 (cool-off)"


def test_a_run_at_an_event_wait_says_it_waits_for_an_event(client_waits, script):
    body = _waiting_state(client_waits, "test-payment-wait")
    assert body["current_step"]["kind"] == "event"
    assert (body["state"], body["waiting_for"]) == ("waiting", "event")
    assert body["description"] == "waiting for an event at step 2 of 3 (payment)"


def test_the_document_declares_every_kind_of_step_and_every_kind_of_wait(client):
    schemas = client.get("/api/openapi.json").json()["components"]["schemas"]
    assert set(schemas["CurrentStep"]["properties"]["kind"]["enum"]) == set(STEP_KINDS)
    waits = schemas["RunState"]["properties"]["waiting_for"]["anyOf"][0]["enum"]
    assert set(waits) == {"approval", "event", "timer", "retry"}
