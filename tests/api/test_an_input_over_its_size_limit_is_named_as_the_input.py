"""A start whose input is over RUNS_INPUT_MAX_BYTES is refused 422, its error located at the
input itself: the start's check located it at ["input"] and the API put "input" before each
location again, naming `input.input`, a field no request has. An input's own field keeps
its place under "input"."""

import pytest

from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db


def test_an_input_over_the_limit_is_refused_naming_the_input(api_client, settings):
    settings.RUNS_INPUT_MAX_BYTES = 1000
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "big-1",
                                     "input": {"order": "x" * 2000, "amount": 5}})

    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_input"
    assert [e["loc"] for e in answer["errors"]] == [["input"]]
    assert "input.input" not in answer["detail"]


def test_a_field_of_the_input_the_schema_refuses_is_named_under_input(api_client):
    response = post_run(api_client, {"workflow": "test-orders", "business_key": "bad-1",
                                     "input": {"order": "o-1", "amount": "many"}})

    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["errors"]] == [["input", "amount"]]
