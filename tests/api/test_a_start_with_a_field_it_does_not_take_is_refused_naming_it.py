"""POST /api/runs refuses a body field it does not take with 422 naming it: a misspelt
field ("inputs", "business_ky") is never dropped and the run started without it."""

import pytest

from api.routes import api
from audit.models import AuditRecord
from runs.models import Run, Step
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db

ORDER = {"workflow": "test-orders", "business_key": "tenant-1:order-1",
         "input": {"order": "o-1", "amount": 5}}


def _rows():
    return Run.objects.count(), Step.objects.count(), AuditRecord.objects.count()


@pytest.mark.parametrize(("body", "unknown"), [
    # The input misspelt: the run would start with the default input, amount 100.
    ({"workflow": "test-orders", "business_key": "k-1", "inputs": {"order": "o-1",
                                                                   "amount": 5}}, ["inputs"]),
    ({**ORDER, "priority": "high"}, ["priority"]),
    ({**ORDER, "callback_url": "https://example.com/", "tags": []}, ["callback_url", "tags"]),
])
def test_a_start_with_an_unknown_field_is_422_naming_it_and_starts_nothing(api_client, body,
                                                                          unknown):
    before = _rows()
    response = post_run(api_client, body)
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_request"
    refused = [e for e in answer["errors"] if e["type"] == "extra_forbidden"]
    assert sorted(e["loc"][-1] for e in refused) == sorted(unknown)
    assert _rows() == before


def test_a_start_with_only_the_fields_it_takes_starts_the_run(api_client):
    response = post_run(api_client, ORDER)
    assert response.status_code == 201, response.content
    assert Run.objects.get(pk=response.json()["id"]).input == ORDER["input"]


def test_the_document_says_each_start_body_takes_no_other_field():
    document = api.get_openapi_schema()
    body = document["paths"]["/api/runs"]["post"]["requestBody"]["content"]["application/json"]
    names = [ref["$ref"].rpartition("/")[2] for ref in body["schema"]["oneOf"]]
    assert "test-orders.start" in names
    for name in names:
        assert document["components"]["schemas"][name]["additionalProperties"] is False, name
