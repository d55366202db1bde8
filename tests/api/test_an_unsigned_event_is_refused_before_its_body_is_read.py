"""POST /api/events/webhook/{source} checks who sends before it reads the body: an unsigned
or wrongly signed request is 401 whatever its body holds (an empty object, a body missing
fields, text that is not JSON), so a caller without the source's secret learns nothing of
the body's schema. Only a correctly signed request has its body validated (422 field by
field). Either way nothing is kept and the waiting run does not move."""

import json
import time

import pytest

from runs.execution import executor
from runs.models import ExternalEvent, RunStatus
from runs.waiting import events
from tests.factories import new_run

pytestmark = pytest.mark.django_db
SECRET = "s3cret"


@pytest.fixture
def waiting(settings):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": SECRET}}
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def _event(run) -> bytes:
    return json.dumps({"workflow": "test-payment-wait", "event": "payment.settled",
                       "event_id": "wh-1", "correlation_key": run.business_key,
                       "payload": {"amount": 120, "reference": "PSP-77"}}).encode()


def _send(client, body: bytes, *, secret: str | None, source="psp",
          content_type="application/json"):
    stamp = str(int(time.time()))
    headers = {} if secret is None else {
        "HTTP_X_EVENT_TIMESTAMP": stamp,
        "HTTP_X_EVENT_SIGNATURE": events.signature(secret, stamp, body)}
    return client.generic("POST", f"/api/events/webhook/{source}", body,
                          content_type=content_type, **headers)


def _nothing_happened(run):
    assert not ExternalEvent.objects.exists()
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING


BAD_BODIES = [b"{}", b'{"workflow": "test-payment-wait"}', b"[]", b"{not json",
              b'{"workflow": NaN}']


@pytest.mark.parametrize("body", BAD_BODIES)
@pytest.mark.parametrize("secret", [None, "not-the-secret"], ids=["unsigned", "wrong-secret"])
def test_a_bad_body_not_signed_by_the_source_is_401_and_names_no_field(client, waiting, body,
                                                                       secret):
    response = _send(client, body, secret=secret)
    assert response.status_code == 401, response.content
    answer = response.json()
    assert answer["error"] == "bad_signature"
    # Nothing of the schema: no field list, no field's name.
    assert "errors" not in answer
    assert not {"event_id", "correlation_key", "payload"} & set(answer["detail"].split())
    _nothing_happened(waiting)


def test_a_body_not_sent_as_json_is_401_when_unsigned(client, waiting):
    response = _send(client, b"event=paid", secret=None, content_type="text/plain")
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "bad_signature"
    _nothing_happened(waiting)


@pytest.mark.parametrize("secret", [None, "not-the-secret"], ids=["unsigned", "wrong-secret"])
def test_a_good_body_not_signed_by_the_source_is_401(client, waiting, secret):
    response = _send(client, _event(waiting), secret=secret)
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "bad_signature"
    _nothing_happened(waiting)


def test_an_unknown_source_is_401_whatever_the_body(client, waiting):
    response = _send(client, b"{}", secret=SECRET, source="nobody")
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "bad_signature"
    _nothing_happened(waiting)


@pytest.mark.parametrize("body", [b"{}", b'{"workflow": "test-payment-wait"}'])
def test_a_bad_body_signed_by_the_source_is_422_naming_its_fields(client, waiting, body):
    response = _send(client, body, secret=SECRET)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_request"
    missing = {e["loc"][-1] for e in answer["errors"]}
    assert {"event", "event_id", "correlation_key"} <= missing
    _nothing_happened(waiting)


def test_a_good_body_signed_by_the_source_is_delivered(client, waiting):
    response = _send(client, _event(waiting), secret=SECRET)
    assert response.status_code == 202, response.content
    assert response.json() == {"status": "delivered", "run_id": waiting.pk}
    assert ExternalEvent.objects.get().source == "webhook:psp"
