"""The OpenAPI document (3.1) says what the product sends as well as what it takes: a
`webhooks` entry per progress event, with its signed headers and the answers it expects, and
a body schema that real deliveries, POSTed by the publisher to a real receiver, validate
against as the document publishes it (formats checked)."""

import hashlib
import hmac
import json

import jsonschema_rs
import pytest

from api import webhooks
from api.models import WebhookSubscriber
from runs.execution import executor
from runs.machine.errors import TransientError
from tests.factories import new_run
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db
SECRET = "whsec-openapi"
HOOKS = {"run.status_changed": "runStatusChanged", "run.step_completed": "runStepCompleted"}
HEADERS = ["X-Webhook-Id", "X-Webhook-Timestamp", "X-Webhook-Signature"]


@pytest.fixture
def receiver():
    r = WebhookReceiver()
    yield r
    r.close()


@pytest.fixture
def document(client):
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    return response.json()


def _validator(document, schema):
    # The schema as the document holds it, its references resolved within the document.
    return jsonschema_rs.validator_for({**schema, "components": document["components"]},
                                       validate_formats=True)


def test_the_document_is_openapi_3_1_with_each_webhook_and_its_signed_headers(document):
    assert document["openapi"].startswith("3.1.")
    assert sorted(document["webhooks"]) == sorted(HOOKS.values())
    for name in HOOKS.values():
        post = document["webhooks"][name]["post"]
        headers = {p["name"]: p for p in post["parameters"] if p["in"] == "header"}
        assert sorted(headers) == sorted(HEADERS)
        assert all(headers[h]["required"] for h in HEADERS)
        assert headers["X-Webhook-Id"]["schema"]["format"] == "uuid"
        signature = _validator(document, headers["X-Webhook-Signature"]["schema"])
        assert signature.is_valid("sha256=" + "0a" * 32)
        assert not signature.is_valid("sha256=" + "0A" * 32)
        assert not signature.is_valid("0a" * 32)
        stamp = _validator(document, headers["X-Webhook-Timestamp"]["schema"])
        assert stamp.is_valid("1767225600") and not stamp.is_valid("1767225600.5")
        assert set(post["responses"]) == {"2XX", "default"}
        body = post["requestBody"]["content"]["application/json"]["schema"]
        assert body["$ref"].startswith("#/components/schemas/")


def test_real_deliveries_validate_against_the_published_schemas(document, receiver, script):
    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret=SECRET)
    # A retry too, so that a step outcome other than success is among the deliveries.
    script.plan["create-task"] = [TransientError("503")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    report = webhooks.publish()
    assert report.delivered == len(receiver.requests) > 0 and report.failed == 0

    seen, invalid = set(), []
    for headers, raw in receiver.requests:
        body = json.loads(raw)
        post = document["webhooks"][HOOKS[body["type"]]]["post"]
        seen.add(body["type"])
        schema = post["requestBody"]["content"]["application/json"]["schema"]
        invalid += [(body["type"], e.message) for e in
                    _validator(document, schema).iter_errors(body)]
        for parameter in post["parameters"]:
            invalid += [(parameter["name"], e.message) for e in
                        _validator(document, parameter["schema"]).iter_errors(
                            headers[parameter["name"]])]
        # The signature is over exactly what the document says: `<timestamp>.<body>`.
        expected = hmac.new(SECRET.encode(),
                            headers["X-Webhook-Timestamp"].encode() + b"." + raw,
                            hashlib.sha256).hexdigest()
        assert headers["X-Webhook-Signature"] == f"sha256={expected}"
        assert headers["X-Webhook-Id"] == body["delivery_id"]
    assert invalid == []
    assert seen == set(HOOKS)
