"""A search holding a control character (a line break, an escape, a bidi override, a tag
character above U+FFFF) is refused at every door naming the search, as a NUL in it is and as
every text naming one thing is (runs.machine.storable.has_control_characters): GET /api/runs
answers 422 with the words beside `q`, the console's runs page shows them as an invalid
filter (no server error), manage.py list_runs names --search, and a bulk job's filter is
refused alike. They answered 200 with no run and "no run matches", which told the person
that the run they looked for does not exist. No run is listed; a search around which a
space stands still finds its run."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from tests.console.test_a_runs_list_filter_the_database_cannot_store_or_no_status_is_refused_alike_at_every_door import (  # noqa: E501
    console_answer,
)
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    STATES,
    doors,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db

WORDS = "search: control characters (a line break, a tab, an escape, ...) cannot be part of it"
SEARCHES = {"two controls": "\x01\x1b", "a control inside a key": "x\x01y",
            "an escape": "KEY\x1b[31m", "a line break": "ab\ncd", "a bidi override": "\u202eab",
            "a tag character above U+FFFF": "ab\U000e0041"}


def cli_listed(*arguments: str) -> list[int]:
    out = io.StringIO()
    call_command("list_runs", "--user", "olga", "--json", *arguments, stdout=out)
    return sorted(r["id"] for r in json.loads(out.getvalue())["runs"])


@pytest.mark.parametrize("case", list(SEARCHES))
def test_each_door_refuses_a_search_holding_a_control_character(doors, script,  # noqa: F811
                                                                 case):
    q = SEARCHES[case]
    STATES["failed_write"](script)

    assert doors.console.get("/runs/", {"q": q}).status_code == 200
    assert console_answer(doors, {"q": q}) == ([], [WORDS])

    api = doors.api.get("/api/runs", {"q": q})
    assert api.status_code == 422, api.content
    assert [e["msg"] for e in api.json()["errors"] if e["loc"] == ["query", "q"]] == [WORDS]
    assert "runs" not in api.json()

    bulk = doors.api.post("/api/bulk", {"action": "terminate", "reason": "INC-7",
                                        "filters": {"workflow": "test-orders", "q": q}},
                          content_type="application/json")
    assert bulk.status_code == 422, bulk.content
    assert [e["msg"] for e in bulk.json()["errors"]] == [WORDS]

    with pytest.raises(CommandError) as refused:
        cli_listed("--search", q)
    assert str(refused.value) == f"--{WORDS}. Nothing was done."


def test_a_search_with_spaces_around_it_still_finds_its_run(doors, script):  # noqa: F811
    run = STATES["failed_write"](script)
    q = f"  {run.business_key} "
    assert console_answer(doors, {"q": q}) == ([run.pk], [])
    assert [r["id"] for r in doors.api.get("/api/runs", {"q": q}).json()["runs"]] == [run.pk]
    assert cli_listed("--search", q) == [run.pk]
