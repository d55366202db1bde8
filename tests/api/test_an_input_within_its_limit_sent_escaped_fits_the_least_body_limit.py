"""An input is measured as compact JSON in UTF-8 (RUNS_INPUT_MAX_BYTES), but a client that
escapes every non-ASCII character, as Python's json.dumps does by default, sends it in a
body up to three times that size. The least request body limit a process starts with holds
such a body: an event payload at its limit, written in a language that is not English and
sent escaped, is delivered, not refused with a 413 that names neither the payload nor its
limit."""

import json

import pytest

from api.tokens import token_create
from console.env import BY_NAME, least_of
from runs.execution import executor
from runs.machine.artifacts import over_input_limit
from runs.models import RunStatus, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db

LIMIT = 262144


@pytest.fixture(autouse=True)
def _least_body_limit(settings):
    settings.RUNS_INPUT_MAX_BYTES = LIMIT
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = least_of(
        BY_NAME["DATA_UPLOAD_MAX_MEMORY_SIZE"], environ={"RUNS_INPUT_MAX_BYTES": str(LIMIT)})


def _payload_at_the_limit(letter: str) -> dict:
    """A payment whose payload is exactly LIMIT bytes as compact JSON, its reference
    written in `letter`s (and ASCII to make up the last bytes)."""
    base = {"amount": 5, "reference": ""}
    room = LIMIT - len(json.dumps(base, separators=(",", ":")))
    width = len(letter.encode())
    reference = letter * (room // width) + "r" * (room % width)
    payload = {**base, "reference": reference}
    assert over_input_limit(payload) is None and over_input_limit({**payload, "x": 1})
    return payload


@pytest.mark.parametrize("letter", ["é", "😀"])
def test_a_payload_at_its_limit_sent_escaped_is_delivered(client, settings, letter):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    _, token = token_create(name="psp", workflows=["test-payment-wait"])
    body = json.dumps({"workflow": "test-payment-wait", "event": "payment.settled",
                       "event_id": "e-1", "correlation_key": run.business_key,
                       "payload": _payload_at_the_limit(letter)})  # ensure_ascii: escaped
    # Too big for a body limit that holds the input as measured, with its room.
    assert len(body) > LIMIT + 65536
    assert len(body) <= settings.DATA_UPLOAD_MAX_MEMORY_SIZE

    response = client.post("/api/events", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {token}")

    assert response.status_code == 202, response.content[:300]
    assert step(run, "payment").status == StepStatus.SUCCEEDED
    assert step(run, "payment").result["reference"].startswith(letter * 10)
