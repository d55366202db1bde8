"""POST /api/runs: 201 for a new run, 200 for the same event again, 409 naming the run for a
reused business key, 422 field by field, 404 for an unknown workflow, 403 outside the
token's scope; nothing is written on any refusal."""

import json

import pytest

from audit.models import AuditRecord
from runs.models import Run, Step, Workflow
from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db

ORDER = {"workflow": "test-orders", "business_key": "tenant-1:order-1",
         "input": {"order": "o-1", "amount": 5}}


def _rows():
    return (Run.objects.count(), Step.objects.count(), AuditRecord.objects.count(),
            Workflow.objects.count())


def test_a_new_event_starts_a_run_201_with_its_state_and_links(api_client):
    response = post_run(api_client, ORDER)
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert body == {
        "id": run.pk, "workflow": "test-orders", "business_key": "tenant-1:order-1",
        "state": "accepted",
        "status_url": f"http://testserver/api/runs/{run.pk}",
        "console_url": f"http://testserver/runs/{run.pk}/",
    }
    assert run.input == {"order": "o-1", "amount": 5} and run.status == "queued"


def test_the_run_log_names_the_token_that_started_it(api_client):
    run_id = post_run(api_client, ORDER).json()["id"]
    started = AuditRecord.objects.get(run_id=run_id, action="started")
    assert (started.actor_kind, started.actor_label) == ("system", "api-token:erp")


def test_the_same_event_delivered_again_is_200_with_the_same_run_and_writes_nothing(api_client):
    first = post_run(api_client, ORDER).json()
    before = _rows()
    # The same input, its keys in another order and its default spelled out.
    again = post_run(api_client, {**ORDER, "input": {"amount": 5, "order": "o-1"}})
    assert again.status_code == 200 and again.json() == first
    assert _rows() == before


def test_a_reused_business_key_with_a_different_input_is_409_naming_the_run(api_client):
    first = post_run(api_client, ORDER).json()
    before = _rows()
    response = post_run(api_client, {**ORDER, "input": {"order": "o-1", "amount": 6}})
    assert response.status_code == 409
    body = response.json()
    assert body["error"] == "business_key_conflict"
    assert body["existing_run"]["id"] == first["id"]
    assert body["existing_run"]["status_url"] == first["status_url"]
    assert f"run {first['id']}" in body["detail"]
    assert _rows() == before


@pytest.mark.parametrize(("bad_input", "loc", "kind"), [
    ({"amount": 5}, ["input", "order"], "missing"),
    ({"order": "o-1", "amount": "five"}, ["input", "amount"], "int_type"),
    # Strict JSON types, as the published schema says: "5" is not an integer.
    ({"order": "o-1", "amount": "5"}, ["input", "amount"], "int_type"),
    ({"order": 7}, ["input", "order"], "string_type"),
    ({"order": "o\u0000-1"}, ["input", "order"], "string_nul"),
])
def test_input_failing_the_workflow_schema_is_422_field_by_field_and_writes_nothing(
        api_client, bad_input, loc, kind):
    before = _rows()
    response = post_run(api_client, {**ORDER, "input": bad_input})
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["error"] == "invalid_input"
    assert [(e["loc"], e["type"]) for e in body["errors"]] == [(loc, kind)]
    assert ".".join(loc) in body["detail"]
    assert _rows() == before


@pytest.mark.parametrize(("body", "loc"), [
    ({"business_key": "k", "input": {}}, ["workflow"]),
    ({"workflow": "test-orders", "business_key": "", "input": {}}, ["business_key"]),
    ({"workflow": "test-orders", "business_key": "k" * 301, "input": {}}, ["business_key"]),
    ({"workflow": "test-orders", "business_key": "a\u0000b", "input": {}}, ["business_key"]),
    ({"workflow": "test-orders", "business_key": "k", "input": []}, ["input"]),
])
def test_a_body_that_does_not_match_the_request_schema_is_422_naming_the_field(api_client, body,
                                                                               loc):
    before = _rows()
    response = post_run(api_client, body)
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "invalid_request"
    assert [e["loc"] for e in response.json()["errors"]] == [loc]
    assert _rows() == before


@pytest.mark.parametrize("raw", ["{not json", '{"workflow": NaN}', ""])
def test_a_body_that_is_not_json_is_400_or_422_never_500(api_client, raw):
    before = _rows()
    response = api_client.post("/api/runs", raw, content_type="application/json")
    assert response.status_code in (400, 422), response.content
    assert response.json()["error"] in ("bad_request", "invalid_request")
    assert _rows() == before


def test_an_unknown_workflow_is_404_and_writes_nothing(api_client):
    before = _rows()
    response = post_run(api_client, {**ORDER, "workflow": "nope"})
    assert response.status_code == 404
    body = response.json()
    assert body["error"] == "unknown_workflow"
    # It tells the caller what this token may start, not every workflow there is.
    assert "test-orders" in body["detail"] and "test-saga" not in body["detail"]
    assert _rows() == before and not Workflow.objects.filter(name="nope").exists()


def test_a_token_for_workflow_a_cannot_start_workflow_b(api_client):
    before = _rows()
    response = post_run(api_client, {**ORDER, "workflow": "test-saga"})
    assert response.status_code == 403
    assert response.json()["error"] == "workflow_not_allowed"
    assert _rows() == before


def test_a_token_with_no_workflow_can_start_nothing(client, make_token):
    _, plaintext = make_token("idle", workflows=())
    response = post_run(client, ORDER, HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 403


def test_the_response_is_json_with_the_documented_content_type(api_client):
    response = post_run(api_client, ORDER)
    assert response["Content-Type"].startswith("application/json")
    json.loads(response.content)


def test_a_business_key_with_control_characters_is_422_naming_the_field(api_client):
    before = _rows()
    response = post_run(api_client, {**ORDER,
                                     "business_key": "tenant-1:inv-1\r\nBcc: evil@example.com"})
    assert response.status_code == 422, response.content
    body = response.json()
    # The documented schema refuses it (a pattern on business_key), before start_run would.
    assert body["error"] == "invalid_request"
    assert [e["loc"][-1] for e in body["errors"]] == ["business_key"]
    assert _rows() == before
