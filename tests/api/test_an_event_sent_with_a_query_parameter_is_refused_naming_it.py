"""POST /api/events and the signed POST /api/events/webhook/{source} take everything in the
body. A query parameter (an id or a key put in the URL, or one sent twice) is refused with
422 naming it, and nothing is kept or delivered: ignored, it would leave the event delivered
without what the sender meant it to carry."""

import json
import time

import pytest

from api.tokens import token_create
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.waiting import events
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
QUERIES = [("?event_id=evt-9", [["query", "event_id"]]),
           ("?debug=1&debug=2", [["query", "debug"]]),
           ("?correlation_key=a&correlation_key=b&x=1",
            [["query", "correlation_key"], ["query", "x"]])]


@pytest.fixture
def waiting_run(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def _body(run) -> bytes:
    return json.dumps({"workflow": "test-payment-wait", "event": "payment.settled",
                       "event_id": "evt-1", "correlation_key": run.business_key,
                       "payload": {"amount": 5, "reference": "PSP-1"}}).encode()


def _nothing_happened(run):
    assert not ExternalEvent.objects.exists()
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    assert step(run, "payment").status == StepStatus.WAITING


@pytest.mark.parametrize(("query", "named"), QUERIES)
def test_a_tokens_event_with_a_query_parameter_is_422(client, waiting_run, query, named):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])
    response = client.post(f"/api/events{query}", _body(waiting_run),
                           content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 422, response.content
    assert sorted(e["loc"] for e in response.json()["errors"]) == named
    _nothing_happened(waiting_run)


@pytest.mark.parametrize(("query", "named"), QUERIES)
def test_a_signed_event_with_a_query_parameter_is_422(client, settings, waiting_run, query,
                                                      named):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": "s3cret"}}
    body, now = _body(waiting_run), str(int(time.time()))
    response = client.post(f"/api/events/webhook/psp{query}", body,
                           content_type="application/json", HTTP_X_EVENT_TIMESTAMP=now,
                           HTTP_X_EVENT_SIGNATURE=events.signature("s3cret", now, body))
    assert response.status_code == 422, response.content
    assert sorted(e["loc"] for e in response.json()["errors"]) == named
    _nothing_happened(waiting_run)


def test_without_a_query_the_event_is_delivered(client, waiting_run):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])
    response = client.post("/api/events", _body(waiting_run), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 202, response.content
    assert step(waiting_run, "payment").status == StepStatus.SUCCEEDED
