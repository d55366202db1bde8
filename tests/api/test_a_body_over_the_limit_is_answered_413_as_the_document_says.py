"""Every operation that takes a body answers 413 (`request_too_large`) to one larger than
DATA_UPLOAD_MAX_MEMORY_SIZE, before reading it. The OpenAPI document declared 415 for each
such operation and no 413: a client generated from it had no such answer, and a contract
test would flag it as undocumented."""

import pytest

from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


def test_a_start_too_large_is_413_as_its_operation_declares(api_client, settings):
    too_big = settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "k",
                                     "input": {"order": "x" * too_big, "amount": 5}})

    assert response.status_code == 413 and response.json()["error"] == "request_too_large"
    document = api_client.get("/api/openapi.json").json()
    assert "413" in document["paths"]["/api/runs"]["post"]["responses"]


def test_every_operation_with_a_body_declares_its_413_and_415(client):
    document = client.get("/api/openapi.json").json()
    operations = [(f"{method.upper()} {path}", operation["responses"])
                  for path, methods in document["paths"].items()
                  for method, operation in methods.items() if "requestBody" in operation]

    assert len(operations) >= 8
    assert [name for name, answers in operations if not {"413", "415"} <= set(answers)] == []
