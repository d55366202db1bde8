"""GET /api/runs?workflow= takes a part of a workflow's name, as the console and
`manage.py list_runs --workflow` do. One that is part of no name among the token's workflows
is refused with 400 naming it and the token's workflows, never answered with an empty page
that reads as "no run matches"; a workflow beyond the token's, even one with runs, is
neither listed nor named as known."""

import pytest

from api.tokens import token_create
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def headers(db):
    _, plaintext = token_create(name="orders-and-approvals",
                                workflows=["test-orders", "test-approval"])
    return {"HTTP_AUTHORIZATION": f"Bearer {plaintext}"}


def _list(client, headers, workflow):
    return client.get("/api/runs", {"workflow": workflow}, **headers)


def test_a_name_of_no_workflow_is_refused_naming_the_tokens_workflows(client, headers):
    new_run()
    response = _list(client, headers, " nope ")
    assert response.status_code == 400
    assert response.json() == {
        "error": "unknown_workflow",
        "detail": "workflow: no workflow of this token's has a name containing 'nope' "
                  "(its workflows: test-approval, test-orders)"}


def test_a_workflow_beyond_the_tokens_is_refused_as_unknown_and_never_listed(client,
                                                                             headers):
    new_run("test-saga")
    response = _list(client, headers, "saga")
    assert response.status_code == 400
    # The token's own workflows only: test-saga, which has a run, is not told.
    assert response.json()["detail"] == (
        "workflow: no workflow of this token's has a name containing 'saga' "
        "(its workflows: test-approval, test-orders)")
    assert Run.objects.filter(workflow_name="test-saga").count() == 1


def test_a_part_of_a_tokens_workflow_lists_its_runs(client, headers):
    run = new_run()
    new_run("test-saga")
    response = _list(client, headers, "ORDERS")
    assert response.status_code == 200
    assert [r["id"] for r in response.json()["runs"]] == [run.pk]
    # A workflow of the token's with no run yet is no mistake: an empty page.
    response = _list(client, headers, "test-approval")
    assert response.status_code == 200 and response.json()["runs"] == []
