"""GET /api/runs/{id} and GET /api/runs/{id}/investigation refuse a query parameter they do
not take with 422 naming it, as the runs list does: a misspelt option (?lookup=true for
?lookups=true) is never answered as if it had not been sent."""

import pytest

from tests.api.conftest import post_run

pytestmark = pytest.mark.django_db

ORDER = {"workflow": "test-orders", "business_key": "tenant-1:order-1",
         "input": {"order": "o-1", "amount": 5}}


@pytest.fixture
def run_id(api_client):
    response = post_run(api_client, ORDER)
    assert response.status_code == 201, response.content
    return response.json()["id"]


def _refused(response, *names):
    assert response.status_code == 422, response.content
    answer = response.json()
    assert answer["error"] == "invalid_request"
    assert [e["loc"] for e in answer["errors"]] == [["query", name] for name in names]
    assert all(repr(name) in answer["detail"] for name in names)
    # The refusal is all the caller gets: not the run's state beside it.
    assert "state" not in answer and "verdict" not in answer


@pytest.mark.parametrize("query", ["?verbose=1", "?lookups=true"])
def test_the_state_of_a_run_refuses_a_parameter_it_does_not_take(api_client, run_id, query):
    _refused(api_client.get(f"/api/runs/{run_id}{query}"), query[1:].split("=")[0])


def test_the_state_of_a_run_names_every_unknown_parameter(api_client, run_id):
    _refused(api_client.get(f"/api/runs/{run_id}?fields=id&expand=steps"), "fields", "expand")


def test_the_state_of_a_run_without_parameters_is_answered(api_client, run_id):
    response = api_client.get(f"/api/runs/{run_id}")
    assert response.status_code == 200, response.content
    assert response.json()["id"] == run_id


def test_an_investigation_refuses_a_misspelt_option(api_client, run_id):
    _refused(api_client.get(f"/api/runs/{run_id}/investigation?lookup=true"), "lookup")


def test_an_investigation_refuses_an_unknown_parameter_beside_a_known_one(api_client, run_id):
    _refused(api_client.get(f"/api/runs/{run_id}/investigation?lookups=false&depth=2"),
             "depth")


@pytest.mark.parametrize("query", ["", "?lookups=false"])
def test_an_investigation_with_the_parameters_it_takes_is_answered(api_client, run_id, query):
    response = api_client.get(f"/api/runs/{run_id}/investigation{query}")
    assert response.status_code == 200, response.content
    assert "verdict" in response.json()
