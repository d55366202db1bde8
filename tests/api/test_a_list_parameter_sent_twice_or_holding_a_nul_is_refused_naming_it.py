"""The query parameters of the runs list and of a run's history are read once each: one
sent twice (?status=attention&status=queued) is refused with 422 naming it, not answered
with the last one alone; and a filter or a search holding a NUL (which no stored text
holds) is refused naming it, not dropped into an empty filter that lists every run."""

import pytest

from runs.models import RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("query", ["status=attention&status=queued", "limit=1&limit=2",
                                   "q=a&q=b"])
def test_a_list_parameter_sent_twice_is_422_naming_it(api_client, query):
    place(new_run(), status=RunStatus.ATTENTION,
          step_statuses={"create-task": StepStatus.FAILED})
    new_run()
    response = api_client.get(f"/api/runs?{query}")
    assert response.status_code == 422, response.content
    name = query.split("=")[0]
    assert [e["loc"] for e in response.json()["errors"]] == [["query", name]]
    assert repr(name) in response.json()["detail"]


def test_a_history_parameter_sent_twice_is_422_naming_it(api_client):
    run = new_run()
    response = api_client.get(f"/api/runs/{run.pk}/history?limit=1&limit=50")
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [["query", "limit"]]


@pytest.mark.parametrize("name", ["q", "workflow"])
def test_a_search_or_filter_holding_a_nul_is_422_naming_it_not_every_run(api_client, name):
    new_run()
    response = api_client.get(f"/api/runs?{name}=%00")
    assert response.status_code == 422, response.content
    assert [e["loc"] for e in response.json()["errors"]] == [["query", name]]
