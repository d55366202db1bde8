"""Every operation that takes a body reads it only when its Content-Type says JSON
(api.parser): a body sent as text, as a form or with no Content-Type is answered 415 in the
API's error shape, naming what was sent and what is expected, and nothing is written. The
document declares that answer on each of them."""

import json
import time

import pytest

from api.routes import api
from audit.models import AuditRecord
from runs.models import Run, Step
from runs.waiting import events
from runs.world_models import ExternalEvent

pytestmark = pytest.mark.django_db

ORDER = {"workflow": "test-orders", "business_key": "tenant-1:order-1",
         "input": {"order": "o-1", "amount": 5}}


def _rows():
    return (Run.objects.count(), Step.objects.count(), ExternalEvent.objects.count(),
            AuditRecord.objects.count())


def _send(client, path, body: bytes, content_type: str, method: str = "POST", **headers):
    # The test client always sends some Content-Type with a body: "" is a request without
    # one, as Django sees it.
    return client.generic(method, path, body, content_type="application/octet-stream",
                          CONTENT_TYPE=content_type, **headers)


@pytest.mark.parametrize(("content_type", "named"), [
    ("text/plain", "as text/plain"),
    ("text/plain; charset=utf-8", "as text/plain"),
    ("application/x-www-form-urlencoded", "as application/x-www-form-urlencoded"),
    ("", "without a Content-Type"),
])
def test_a_start_sent_as_another_media_type_is_415_and_starts_nothing(api_client,
                                                                        content_type, named):
    before = _rows()
    response = _send(api_client, "/api/runs", json.dumps(ORDER).encode(), content_type)
    assert response.status_code == 415, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["error"] == "unsupported_media_type"
    assert named in body["detail"] and "application/json" in body["detail"]
    assert _rows() == before


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8",
                                          "Application/JSON"])
def test_json_with_a_charset_or_in_capitals_is_json(api_client, content_type):
    response = api_client.post("/api/runs", json.dumps(ORDER), content_type=content_type)
    assert response.status_code == 201, response.content
    assert Run.objects.filter(business_key=ORDER["business_key"]).count() == 1


def _body_operations():
    document = api.get_openapi_schema()
    for path, methods in document["paths"].items():
        for method, operation in methods.items():
            if "requestBody" in operation:
                yield path, method, operation


def _filled(path: str, operation: dict) -> str:
    for parameter in operation.get("parameters", []):
        if parameter["in"] == "path":
            schema = parameter["schema"]
            value = (schema["enum"][0] if "enum" in schema
                     else 1 if schema.get("type") == "integer" else "test-orders")
            path = path.replace("{" + parameter["name"] + "}", str(value))
    return path


def test_every_operation_that_takes_a_body_refuses_one_sent_as_text_and_says_so(api_client,
                                                                              settings):
    operations = list(_body_operations())
    # start, events (token and signed), dispatch pause and resume, run action, approval
    # decision, bulk: a new one is covered without being listed here.
    assert len(operations) >= 8
    # The signed event's body is read only once its signature checks out (an unsigned one is
    # 401 whatever it holds): every request is signed as the source the path names.
    settings.RUNS_EVENT_SOURCES = {"test-orders": {"secret": "s3cret"}}
    body, stamp = b'{"reason": "r"}', str(int(time.time()))
    signed = {"HTTP_X_EVENT_TIMESTAMP": stamp,
              "HTTP_X_EVENT_SIGNATURE": events.signature("s3cret", stamp, body)}
    before = _rows()
    for path, method, operation in operations:
        response = _send(api_client, _filled(path, operation), body, "text/plain",
                         method.upper(), **signed)
        assert response.status_code == 415, (path, response.content)
        assert response.json()["error"] == "unsupported_media_type", path
        declared = operation["responses"][415]
        assert declared["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"}, path
    assert _rows() == before


def test_operations_without_a_body_do_not_declare_415():
    document = api.get_openapi_schema()
    for methods in document["paths"].values():
        for operation in methods.values():
            if "requestBody" not in operation:
                assert 415 not in operation["responses"], operation["operationId"]
