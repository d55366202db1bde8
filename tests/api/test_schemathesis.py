"""schemathesis against the live server: requests generated from the OpenAPI document
(valid ones and deliberately invalid ones) never get a 500, and every response matches the
document: status code, content type, headers and body schema.

The document is the one the server serves (checked below), loaded at collection time so
that each operation is a test of its own; schemathesis' fixture-based loader does not run
on this project's pytest version.

Those items share the function's node id, and pytest-xdist, which schedules by node id,
would run one operation of the twenty-two: this module runs in a pytest of its own, without
-n (make test).
"""

import json
import os
import re
import unicodedata

import pytest
import schemathesis
from django.contrib.auth.models import User
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from api.routes import api
from api.schemas import BUSINESS_KEY_PATTERN, LEFT_TO_THE_START
from api.tokens import token_create
from runs.machine.storable import character_class
from runs.models import RunStatus, Step
from tests.factories import new_run, place

if os.environ.get("PYTEST_XDIST_WORKER"):
    pytest.fail("tests/api/test_schemathesis.py runs without -n: pytest-xdist would run one "
                "of its operations (make test runs it on its own)", pytrace=False)

TEST_WORKFLOWS = ["test-orders", "test-saga", "test-approval", "test-unsafe"]

schema = schemathesis.openapi.from_dict(json.loads(json.dumps(api.get_openapi_schema())))


@pytest.fixture
def api_token(transactional_db):
    # The demo workflows stay out of this token's scope (they answer 403, as documented):
    # their input has e-mail addresses, whose generated forms the validator may refuse.
    _, plaintext = token_create(name="schemathesis", workflows=TEST_WORKFLOWS,
                                rate_limit=1_000_000)
    return plaintext


def test_the_document_tested_is_the_one_the_server_serves(client):
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    served, tested = response.json(), schema.raw_schema
    assert served == json.loads(json.dumps(api.get_openapi_schema()))
    # Test modules collected after this one may register more workflows: the served
    # document then has more start alternatives, and is otherwise the one tested.
    served_body = served["paths"]["/api/runs"]["post"].pop("requestBody")
    tested_body = tested["paths"]["/api/runs"]["post"]["requestBody"]
    alternatives = served_body["content"]["application/json"]["schema"]["oneOf"]
    assert all(alternative in alternatives
               for alternative in tested_body["content"]["application/json"]["schema"]["oneOf"])
    assert served["paths"]["/api/runs"]["post"] == {
        k: v for k, v in tested["paths"]["/api/runs"]["post"].items() if k != "requestBody"}
    assert served["paths"]["/api/runs/{run_id}"] == tested["paths"]["/api/runs/{run_id}"]
    for name, component in tested["components"]["schemas"].items():
        assert served["components"]["schemas"][name] == component, name


TRANSPORT_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
# Operations a request the document accepts may still be refused by, as documented, for
# what no schema can say: a bulk job whose filters name no workflow of the token's, or one
# it does not have (400 invalid_bulk_job; the token here acts for nobody, and such a token
# has its body's faults named before it is told so, 403 no_acting_user); a runs list whose
# `workflow` is part of none of the token's workflows' names (400 unknown_workflow).
JUDGED_BY_THE_TOKEN = {("POST", "/api/bulk"), ("GET", "/api/runs")}
# The control characters a business key may not hold that the document's pattern leaves to
# its description.
UNSAID = re.compile(f"[{character_class(LEFT_TO_THE_START)}]")


def _held_to_what_its_pattern_leaves_unsaid(case) -> None:
    """A start's business key that its document's pattern accepts, in Unicode NFC: the
    document says that in words only ("in Unicode NFC (refused, 422)"), and the refusal is
    the start's own, tested where it is written
    (tests/api/test_a_start_the_runtime_refuses_is_told_in_its_own_words.py); a generated
    key written apart was a schema-valid request answered 422. The pattern says the rest (no
    control character, no blank at either end), but for the format characters above U+FFFF
    (a tag character), which no pattern can name in every dialect and the document's
    description names instead (api.schemas.LEFT_TO_THE_START): each is written as "x" here.
    A key the pattern refuses is left as generated."""
    body = case.body if (case.method.upper(), case.path) == ("POST", "/api/runs") else None
    key = body.get("business_key") if isinstance(body, dict) else None
    if isinstance(key, str) and re.fullmatch(BUSINESS_KEY_PATTERN, key):
        key = unicodedata.normalize("NFC", key)
        body["business_key"] = "".join("x" if UNSAID.match(c) else c for c in key)


@schema.parametrize()
@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_the_api_keeps_its_documented_contract(case, live_server, api_token):
    # The real token in place of the generated one; a case generated without the header (a
    # negative case: it must be refused) is sent without it, never given one here.
    headers = {"Authorization": f"Bearer {api_token}"} if "Authorization" in case.headers \
        else {}
    # HTTP's own headers are not the API's contract: a generated Host names a host the
    # server does not serve, which Django refuses (400) before any operation is reached.
    for name in [n for n in (case.headers or {}) if n.lower() in TRANSPORT_HEADERS]:
        del case.headers[name]
    _held_to_what_its_pattern_leaves_unsaid(case)
    judged = (case.method.upper(), case.path) in JUDGED_BY_THE_TOKEN
    case.call_and_validate(base_url=live_server.url, headers=headers,
                           excluded_checks=[positive_data_acceptance] if judged else None)


@pytest.mark.parametrize("status", list(RunStatus))
def test_the_state_of_a_run_in_every_status_matches_the_document(live_server, api_token,
                                                                  status):
    """Generated ids mostly find no run: here real runs, one per status, are read back and
    their responses validated against the document (schema, headers, content type)."""
    run = place(new_run(), status=status, current_step="create-task",
                attention_reason="permanent_error" if status in (
                    RunStatus.ATTENTION, RunStatus.COMPENSATION_FAILED) else "")
    Step.objects.filter(run=run, name="fetch").update(error_class="transient")
    case = schema["/api/runs/{run_id}"]["GET"].Case(path_parameters={"run_id": run.pk})
    response = case.call_and_validate(base_url=live_server.url,
                                      headers={"Authorization": f"Bearer {api_token}"})
    assert response.status_code == 200


@pytest.mark.parametrize(("body", "expected"), [
    ({"workflow": "test-orders", "business_key": "k-1", "input": {"order": "o"}}, [201, 200]),
    ({"workflow": "test-orders", "business_key": "k-2", "input": {"order": 5}}, [422]),
    ({"workflow": "customer-onboarding", "business_key": "k-3",
      "input": {"email": "a@example.com", "name": "A", "plan": "pro"}}, [403]),
    ({"workflow": "nope", "business_key": "k-4", "input": {}}, [404]),
])
def test_each_documented_answer_of_a_start_matches_the_document(live_server, api_token, body,
                                                                expected):
    operation = schema["/api/runs"]["POST"]
    statuses = []
    for _ in expected:
        response = operation.Case(body=body, media_type="application/json").call_and_validate(
            base_url=live_server.url, headers={"Authorization": f"Bearer {api_token}"})
        statuses.append(response.status_code)
    assert statuses == expected
    if expected == [201, 200]:
        conflict = operation.Case(body={**body, "input": {"order": "other"}},
                                  media_type="application/json").call_and_validate(
            base_url=live_server.url, headers={"Authorization": f"Bearer {api_token}"})
        assert conflict.status_code == 409


def test_each_answer_of_a_subscriber_kept_over_the_api_matches_the_document(live_server,
                                                                           transactional_db):
    """Generated requests come with a token that acts for nobody (403): here a person's
    token makes, reads, changes and deletes a subscriber, each answer validated."""
    _, plaintext = token_create(name="keeper", workflows=TEST_WORKFLOWS, rate_limit=1_000_000,
                                acting_user=User.objects.create_superuser("keeper"))
    headers = {"Authorization": f"Bearer {plaintext}"}
    one = "/api/subscribers/{subscriber_id}"

    def answer(path, method, **case):
        return schema[path][method].Case(**case).call_and_validate(base_url=live_server.url,
                                                                   headers=headers)

    made = answer("/api/subscribers", "POST", media_type="application/json", body={
        "name": "erp", "url": "https://erp.example.com/in", "secret": "s3cret-4711-only-erp",
        "workflows": ["test-orders"]})
    assert made.status_code == 201
    at = {"path_parameters": {"subscriber_id": made.json()["id"]}}
    assert answer("/api/subscribers", "GET").status_code == 200
    assert answer(one, "GET", **at).status_code == 200
    changed = answer(one, "PATCH", media_type="application/json",
                     body={"secret": "n3w-0815-rolled-out"}, **at)
    assert changed.status_code == 200 and changed.json()["previous_secret_signs_until"]
    assert answer(one, "DELETE", **at).status_code == 200
    assert answer(one, "GET", **at).status_code == 404


def test_the_docs_page_is_served_from_our_own_static_files(client):
    response = client.get("/api/docs")
    assert response.status_code == 200
    assert b"/static/ninja/swagger-ui-bundle.js" in response.content
