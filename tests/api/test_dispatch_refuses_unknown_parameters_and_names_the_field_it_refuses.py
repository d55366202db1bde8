"""The pause switch over the API refuses what it would otherwise ignore or misname, as the
runs list does: GET /api/workflows/{w}/dispatch refuses a query parameter (it takes none)
with 422 naming it; pause and resume refuse a body field they do not take (a misspelt
`sytem` would pause the whole workflow instead of one system) with 422 naming it; and a
reason no record may keep or a system no step reaches is 422 naming `reason` or `system`,
not the body. Nothing is paused or lifted, and nothing is recorded, on any refusal."""

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db

URL = "/api/workflows/test-two-systems/dispatch"


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


@pytest.fixture
def headers(db):
    boss = User.objects.create_superuser("boss")
    _, plaintext = token_create(name="ops", workflows=["test-two-systems"], acting_user=boss)
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _post(client, headers, change, body):
    return client.post(f"{URL}/{change}", body, content_type="application/json", **headers)


def _state():
    return (sorted(DispatchPause.objects.values_list("workflow_name", "system", "reason")),
            ControlRecord.objects.count())


def _locs(response):
    assert response.status_code == 422, response.content
    assert response.json()["error"] == "invalid_request"
    return [e["loc"] for e in response.json()["errors"]]


def test_reading_the_switch_refuses_a_query_parameter_naming_it(client, headers):
    assert _locs(client.get(URL, {"system": "ledger"}, **headers)) == [["query", "system"]]
    assert _locs(client.get(URL, {"a": "1", "b": "2"}, **headers)) == [["query", "a"],
                                                                      ["query", "b"]]
    read = client.get(URL, **headers)
    assert read.status_code == 200 and read.json()["paused"] is False


@pytest.mark.parametrize("change", ["pause", "resume"])
def test_a_body_field_the_switch_does_not_take_is_refused_naming_it(client, headers, change):
    # Something to lift, so that a resume refused has something it could have lifted.
    dispatch.pause_dispatch(workflow="test-two-systems", actor=SYSTEM, reason="INC-1",
                            system="ledger")
    before = _state()
    response = _post(client, headers, change, {"reason": "INC-7", "sytem": "ledger"})
    assert _locs(response) == [["sytem"]]
    assert _state() == before


@pytest.mark.parametrize("change", ["pause", "resume"])
@pytest.mark.parametrize(("body", "field"), [
    ({"reason": "   "}, "reason"),
    ({"reason": "INC-7 \u202ederahs\u202c"}, "reason"),
    ({"reason": "INC-7", "system": "moon"}, "system"),
])
def test_a_bad_reason_or_system_is_refused_naming_it(client, headers, change, body, field):
    dispatch.pause_dispatch(workflow="test-two-systems", actor=SYSTEM, reason="INC-1",
                            system="ledger")
    before = _state()
    response = _post(client, headers, change, body)
    assert _locs(response) == [[field]]
    assert _state() == before


def test_the_document_says_the_body_takes_no_other_field(client):
    schemas = client.get("/api/openapi.json").json()["components"]["schemas"]
    assert schemas["PauseIn"]["additionalProperties"] is False
