"""An event sent again under a new id (the same source, event, correlation key and payload as
one a run took: a sender that retries by minting ids) is answered 200 "duplicate", naming
the run that took the first, and is not kept: before, it was kept and completed the next
wait under the key (a later run's), or the wait of another run waiting beside the first,
with what the first run took. An event under the key with another payload, a redacted field
included, is a new event: delivered or kept as any."""

import json
from datetime import timedelta

import pytest

from api.tokens import token_create
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import ExternalEvent, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db
FLOW = "test-api-one-key-resent"


@pytest.fixture
def by_order_number():
    """A wait under a key its correlate() gives: every run of this test waits under PO-1."""
    flow = Workflow(FLOW, version=1, input=OrderIn)
    flow.wait_for_event("confirmed", event="supplier.confirmed",
                        correlate=lambda data: "PO-1", timeout=timedelta(hours=1),
                        on_timeout="fail")
    yield flow
    registry.unregister(flow)


@pytest.fixture
def send(client, by_order_number):
    _, token = token_create(name="supplier-portal", workflows=[FLOW])

    def sent(event_id: str, payload: dict):
        return client.post("/api/events", json.dumps({
            "workflow": FLOW, "event": "supplier.confirmed", "event_id": event_id,
            "correlation_key": "PO-1", "payload": payload}),
            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
    return sent


def waiting(run):
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def test_a_resend_under_a_new_id_is_a_duplicate_and_no_later_run_takes_it(send):
    first = waiting(new_run(FLOW, order="o-1"))
    assert send("sup-1", {"confirmed_by": "ann"}).json()["status"] == "delivered"
    assert step(first, "confirmed").status == StepStatus.SUCCEEDED

    again = send("sup-2", {"confirmed_by": "ann"})

    assert again.status_code == 200, again.content
    assert (again.json()["status"], again.json()["run_id"]) == ("duplicate", first.pk)
    assert not ExternalEvent.objects.filter(event_id="sup-2").exists()  # nothing kept
    later = waiting(new_run(FLOW, order="o-2"))
    assert step(later, "confirmed").status == StepStatus.WAITING  # not completed by it
    # Its own confirmation, which says something else, is an event of its own.
    own = send("sup-3", {"confirmed_by": "bob"})
    assert (own.json()["status"], own.json()["run_id"]) == ("delivered", later.pk)
    assert step(later, "confirmed").result == {"confirmed_by": "bob"}


def test_a_resend_does_not_complete_another_run_waiting_beside_the_first(send):
    first, beside = waiting(new_run(FLOW, order="o-1")), waiting(new_run(FLOW, order="o-2"))
    assert send("sup-1", {"confirmed_by": "ann"}).json()["run_id"] == first.pk

    again = send("sup-2", {"confirmed_by": "ann"})

    assert (again.json()["status"], again.json()["run_id"]) == ("duplicate", first.pk)
    assert step(beside, "confirmed").status == StepStatus.WAITING
    assert ExternalEvent.objects.filter(consumed_run_id=beside.pk).count() == 0
