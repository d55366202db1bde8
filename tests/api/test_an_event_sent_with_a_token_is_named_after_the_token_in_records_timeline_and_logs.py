"""An event sent through the API with a token is from "api-token:<name>": the run's audit
record, its timeline and the log name that source in full, with the event's id. The label
read like a "token: value" pair to the redaction, which masked the name and the id after it
("api-token:[redacted]"), so nobody could tell which system had sent the event. A credential
in an error text is masked as before (tests/audit/test_redaction_masks_every_kind_of_secret_
and_leaves_plain_text_whole.py checks each kind)."""

import io
import json
import logging
from datetime import timedelta

import pytest

from api.tokens import token_create
from audit.actions import AuditAction
from audit.models import AuditRecord
from console.timeline import timeline_page
from observability.logs import JsonFormatter
from runs.execution import executor
from runs.models import ExternalEvent, RunStatus
from runs.waiting import kept_expiry
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
PAID = {"amount": 120, "reference": "PSP-77"}
SOURCE = "api-token:erp-bridge"


@pytest.fixture
def send(client):
    _, plaintext = token_create(name="erp-bridge", workflows=["test-payment-wait"])

    def post(key, event_id):
        body = {"workflow": "test-payment-wait", "event": "payment.settled",
                "event_id": event_id, "correlation_key": key, "payload": PAID}
        return client.post("/api/events", json.dumps(body), content_type="application/json",
                           HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    return post


@pytest.fixture
def json_lines():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("runs.waiting.kept_expiry")
    logger.addHandler(handler)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    logger.removeHandler(handler)


def test_a_delivered_event_names_the_token_in_its_record_and_on_the_timeline(send, script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    answer = send(run.business_key, "evt-1")

    assert answer.status_code == 202 and answer.json()["status"] == "delivered"
    (record,) = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED)
    assert record.data == {"source": SOURCE, "event_id": "evt-1"}
    assert record.actor_label == SOURCE
    (shown,) = [e for e in timeline_page(run).entries if e.title == "event received"]
    assert f'"source": "{SOURCE}"' in shown.data and "[redacted]" not in shown.data
    assert step(run, "payment").remote_ref == f"event:{SOURCE}:evt-1"


def test_a_kept_event_that_expires_is_logged_naming_the_token_and_the_event(
        send, json_lines):
    answer = send("tenant-1:nobody-waits", "evt-2")

    assert answer.status_code == 202 and answer.json()["status"] == "kept"
    kept = ExternalEvent.objects.get(event_id="evt-2")
    assert kept.source == SOURCE
    assert kept_expiry.expire_kept_events(now=kept.keep_until + timedelta(seconds=1)) == 1
    (line,) = json_lines()
    assert f"({SOURCE}:evt-2) expired" in line["message"]
    assert "[redacted]" not in line["message"]
    kept.refresh_from_db()
    assert kept.expired_at is not None and kept.consumed_run_id is None
    assert not AuditRecord.objects.filter(action=AuditAction.EVENT_RECEIVED).exists()
