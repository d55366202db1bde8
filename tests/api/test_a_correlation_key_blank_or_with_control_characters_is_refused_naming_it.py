"""An event's correlation key of spaces only, or holding a line break or another control
character, is refused with 422 naming correlation_key, as such an event id is (one rule,
runs.machine.storable.identifier_problem), and nothing is written: such a key was taken,
and kept for a wait under it, to be shown on the run's page and in log lines where a line
break forges a line. A wait whose correlate() gives such a key is held for a person by the
same rule (tests/runs/test_an_event_wait_under_a_key_no_event_can_carry_is_held_for_a_person.py)."""

import json

import pytest

from api.tokens import token_create
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db


@pytest.fixture
def post(client):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])

    def send(key, event_id="evt-1"):
        body = {"workflow": "test-payment-wait", "event": "payment.settled",
                "event_id": event_id, "correlation_key": key,
                "payload": {"amount": 5, "reference": "PSP-1"}}
        return client.post("/api/events", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    return send


@pytest.fixture
def waiting(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run, AuditRecord.objects.filter(run=run).count()


def nothing_written(run, records: int) -> None:
    assert not ExternalEvent.objects.exists()
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert step(run, "payment").status == StepStatus.WAITING
    assert AuditRecord.objects.filter(run=run).count() == records


@pytest.mark.parametrize(("suffix", "msg"), [
    (None, "blank (only spaces)"),
    ("\n", "contains control characters"),
    ("\r\n2", "contains control characters"),
    ("\x1b[2K", "contains control characters"),
    ("\u2028", "contains control characters"),
    ("\u202e1", "contains control characters"),
])
def test_such_a_key_is_422_naming_it_and_the_run_still_waits(post, waiting, suffix, msg):
    run, records = waiting
    key = "  \u3000 " if suffix is None else run.business_key + suffix

    response = post(key)

    assert response.status_code == 422, response.content
    assert response.json()["errors"] == [{"loc": ["correlation_key"], "msg": msg,
                                          "type": "value_error"}]
    assert response.json()["detail"] == f"correlation_key: {msg}; nothing was kept"
    nothing_written(run, records)


def test_an_id_and_a_key_both_refused_are_both_named(post, waiting):
    run, records = waiting
    response = post(f"{run.business_key}\n", event_id=" ")
    assert response.status_code == 422, response.content
    assert [(e["loc"], e["msg"]) for e in response.json()["errors"]] == [
        (["event_id"], "blank (only spaces)"),
        (["correlation_key"], "contains control characters")]
    nothing_written(run, records)


def test_the_key_written_without_them_is_delivered(post, waiting):
    run, _ = waiting
    assert post(f"{run.business_key}\n").status_code == 422
    response = post(run.business_key)
    assert response.status_code == 202, response.content
    assert response.json() == {"status": "delivered", "run_id": run.pk}
    assert step(run, "payment").status == StepStatus.SUCCEEDED
