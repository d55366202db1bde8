"""The headers of a signed webhook are checked like any wrong signature, whatever they
hold: a signature with non-ASCII characters is refused 401 (not a 500 anyone could cause
without the secret), and a timestamp must be a finite number within the window (a NaN or
an infinity never is, or a request stamped so would stay valid forever)."""

import json
import time

import pytest

from runs.models import ExternalEvent
from runs.waiting import events
from runs.waiting.payloads import EventRefused

pytestmark = pytest.mark.django_db
BODY = json.dumps({"workflow": "test-payment-wait", "event": "payment.settled",
                   "event_id": "wh-1", "correlation_key": "order-1",
                   "payload": {"amount": 1, "reference": "r"}}).encode()


@pytest.fixture
def post(client, settings):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": "s3cret"}}

    def send(timestamp, signature):
        return client.post("/api/events/webhook/psp", BODY, content_type="application/json",
                           HTTP_X_EVENT_TIMESTAMP=timestamp, HTTP_X_EVENT_SIGNATURE=signature)

    return send


@pytest.mark.parametrize("signature", ["é" * 64, "\u20ac", "0" * 63 + "\u00ff"])
def test_a_signature_with_non_ascii_characters_is_a_bad_signature(post, signature):
    response = post(str(int(time.time())), signature)
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "bad_signature"
    assert not ExternalEvent.objects.exists()


@pytest.mark.parametrize("timestamp", ["nan", "NaN", "-nan", "inf", "-inf", "Infinity"])
def test_a_timestamp_that_is_not_a_finite_number_is_refused_even_when_signed(post, timestamp):
    response = post(timestamp, events.signature("s3cret", timestamp, BODY))
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "bad_signature"
    assert not ExternalEvent.objects.exists()


def test_verify_webhook_names_the_timestamp_it_refuses(settings):
    settings.RUNS_EVENT_SOURCES = {"psp": {"secret": "s3cret"}}
    with pytest.raises(EventRefused, match="X-Event-Timestamp"):
        events.verify_webhook("psp", timestamp="nan", body=BODY,
                              sent_signature=events.signature("s3cret", "nan", BODY))
