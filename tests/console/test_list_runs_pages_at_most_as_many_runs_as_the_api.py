"""list_runs --limit holds a page to what GET /api/runs allows (200 runs): a script moving
between the command and the API keeps its pages. One more is refused in one line naming the
limit, and nothing is listed."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from api.tokens import token_create
from console.management.commands.list_runs import MOST_RUNS_A_PAGE
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _api_list(client, limit: int):
    _, plaintext = token_create(name=f"t{limit}", workflows=["test-orders"])
    return client.get("/api/runs", {"limit": limit}, HTTP_AUTHORIZATION=f"Bearer {plaintext}")


def test_the_command_and_the_api_allow_the_same_most_runs_a_page(client):
    assert _api_list(client, MOST_RUNS_A_PAGE).status_code == 200
    assert _api_list(client, MOST_RUNS_A_PAGE + 1).status_code == 422


@pytest.mark.parametrize("limit", ["201", "1000", "0"])
def test_a_limit_the_api_would_refuse_is_refused_and_lists_nothing(limit):
    new_run(wake=False)
    out = io.StringIO()
    with pytest.raises(CommandError, match=f"^--limit must be a whole number from 1 to 200, "
                                           f"not {limit}; "
                                           "page on with --after$"):
        call_command("list_runs", "--limit", limit, "--json", stdout=out)
    assert out.getvalue() == ""


def test_the_most_the_api_allows_lists_a_page():
    run = new_run(wake=False)
    out = io.StringIO()
    call_command("list_runs", "--limit", "200", "--json", stdout=out)
    assert [r["id"] for r in json.loads(out.getvalue())["runs"]] == [run.pk]
