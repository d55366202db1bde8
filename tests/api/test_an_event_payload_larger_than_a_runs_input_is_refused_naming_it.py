"""An event's payload is input from outside, as a start's is, and becomes the waiting step's
result as it is (kept in the step's row, read at every claim of the run and on its page). One
larger as JSON than a run's input may be (RUNS_INPUT_MAX_BYTES) is refused with 422 naming
the payload and the limit, whether a run waits for it or it would be kept, and nothing is
written; so is one a person delivers by hand. An event id of spaces is refused naming the
field, as a business key of spaces is: every event sent with its id left blank would
otherwise be that one event, the next ones answered "duplicate"."""

import json

import pytest

from api.tokens import token_create
from approvals.operator_actions import ActionInputError
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
LIMIT = 1000


@pytest.fixture(autouse=True)
def _small_input_limit(settings):
    settings.RUNS_INPUT_MAX_BYTES = LIMIT


@pytest.fixture
def post(client):
    _, plaintext = token_create(name="psp", workflows=["test-payment-wait"])

    def send(key, payload, event_id="e-1"):
        body = {"workflow": "test-payment-wait", "event": "payment.settled",
                "event_id": event_id, "correlation_key": key, "payload": payload}
        return client.post("/api/events", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")

    return send


def _paid(size: int) -> dict:
    """A payment whose payload is `size` bytes as compact JSON."""
    base = {"amount": 5, "reference": ""}
    filler = size - len(json.dumps(base, separators=(",", ":")))
    return {**base, "reference": "r" * filler}


@pytest.fixture
def waiting_run(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def _state(run):
    run = Run.objects.get(pk=run.pk)
    return (run.status, run.audit_seq, step(run, "payment").status,
            AuditRecord.objects.filter(run=run).count(), ExternalEvent.objects.count())


def test_a_payload_over_the_limit_for_a_waiting_run_is_422_and_the_run_still_waits(
        post, waiting_run):
    before = _state(waiting_run)
    response = post(waiting_run.business_key, _paid(LIMIT + 1))
    assert response.status_code == 422, response.content
    answer = response.json()
    assert [e["loc"] for e in answer["errors"]] == [["payload"]]
    assert "RUNS_INPUT_MAX_BYTES" in answer["detail"] and "nothing was kept" in answer["detail"]
    assert _state(waiting_run) == before


def test_a_payload_over_the_limit_that_would_be_kept_is_422_and_nothing_is_kept(post):
    response = post("nobody-waits-yet", _paid(LIMIT + 1))
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [["payload"]]
    assert not ExternalEvent.objects.exists()


def test_a_payload_at_the_limit_is_delivered(post, waiting_run):
    response = post(waiting_run.business_key, _paid(LIMIT))
    assert response.status_code == 202, response.content
    assert step(waiting_run, "payment").status == StepStatus.SUCCEEDED


def test_a_payload_over_the_limit_delivered_by_hand_is_refused(waiting_run):
    before = _state(waiting_run)
    with pytest.raises(ActionInputError, match="RUNS_INPUT_MAX_BYTES"):
        ACTIONS["event_received"].perform(
            waiting_run.pk, actor=Actor(kind="user", label="olga"),
            given=ActionInput(reason="confirmed by phone",
                              evidence=json.dumps(_paid(LIMIT + 1))))
    assert _state(waiting_run) == before
