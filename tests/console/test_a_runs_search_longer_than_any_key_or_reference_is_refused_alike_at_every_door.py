"""A runs search longer than anything it looks in (a business key, a remote or compensation
reference: 300 characters at most) is refused alike at every door, in the words of the one
rule (runs.reads.filter_problems): the console's runs page shows it as an invalid filter,
GET /api/runs answers 422 with it beside `q`, manage.py list_runs a one-line error naming
--search. The API refused it in the schema's words ("String should have at most 300
characters") while the console and list_runs answered "no run matches". A search of 300
characters is still a search at every door."""

import pytest
from django.core.management import CommandError

from runs.models import Run
from tests.console.test_a_runs_list_filter_the_database_cannot_store_or_no_status_is_refused_alike_at_every_door import (  # noqa: E501
    cli_listed,
    console_answer,
)
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    STATES,
    doors,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db

WORDS = ("search: at most 300 characters (no business key or reference is longer); this one "
         "has 301")


def test_each_door_refuses_a_search_of_301_characters_in_the_same_words(doors, script):  # noqa: F811
    run = STATES["failed_write"](script)
    q = run.business_key + "x" * (301 - len(run.business_key))
    runs_before = Run.objects.count()

    assert console_answer(doors, {"q": q}) == ([], [WORDS])

    api = doors.api.get("/api/runs", {"q": q})
    assert api.status_code == 422
    body = api.json()
    assert body["error"] == "invalid_request"
    assert [e["msg"] for e in body["errors"] if e["loc"] == ["query", "q"]] == [WORDS]
    assert "runs" not in body

    with pytest.raises(CommandError) as refused:
        cli_listed("--search", q)
    assert str(refused.value) == f"--{WORDS}. Nothing was done."
    assert Run.objects.count() == runs_before


def test_a_search_of_300_characters_is_a_search_at_every_door(doors, script):  # noqa: F811
    run = STATES["failed_write"](script)
    q = "x" * 300
    assert console_answer(doors, {"q": q}) == ([], [])
    api = doors.api.get("/api/runs", {"q": q})
    assert api.status_code == 200 and api.json()["runs"] == []
    assert cli_listed("--search", q) == []
    assert console_answer(doors, {"q": run.business_key}) == ([run.pk], [])
