"""An event id of spaces is refused with 422 naming event_id, as a business key of spaces
is, and nothing is written: every event a sender sent with its id left blank would otherwise
be that one event, the next ones answered "duplicate" (or 409) and never delivered."""

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

    def send(key, event_id):
        body = {"workflow": "test-payment-wait", "event": "payment.settled",
                "event_id": event_id, "correlation_key": key,
                "payload": {"amount": 5, "reference": "PSP-1"}}
        return client.post("/api/events", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    return send


@pytest.mark.parametrize("event_id", [" ", "   \u3000"])
def test_an_event_id_of_spaces_is_422_naming_it_and_the_run_still_waits(post, script,
                                                                        event_id):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    records = AuditRecord.objects.filter(run=run).count()

    response = post(run.business_key, event_id)

    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [["event_id"]]
    assert "blank" in response.json()["detail"]
    assert not ExternalEvent.objects.exists()
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert step(run, "payment").status == StepStatus.WAITING
    assert AuditRecord.objects.filter(run=run).count() == records


def test_an_id_with_spaces_around_text_is_taken(post, script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert post(run.business_key, " evt 1 ").status_code == 202
    assert step(run, "payment").status == StepStatus.SUCCEEDED
