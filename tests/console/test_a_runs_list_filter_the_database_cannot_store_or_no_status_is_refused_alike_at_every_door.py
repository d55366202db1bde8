"""The runs list's status filter and search are refused alike at every door when no run can
be listed by them: a status none of the runs have, and a search holding a NUL character
(no text column stores one). The console's runs page shows it as an invalid filter, GET
/api/runs answers 422 with it in `errors` beside the parameter, and manage.py list_runs a
one-line error naming the option (--status, --search), each in the same words, which name
the field and, for a status, the statuses there are (runs.reads.filter_problems). Each door
used to word it in its own framework's words (a form's "Select a valid choice", the
schema's enum, argparse's choices). No run is listed, and a status the runs have still
lists theirs."""

import html
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run, RunStatus
from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    STATES,
    doors,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db

STATUSES = ", ".join(RunStatus.values)
CASES = {
    "an unknown status": ({"status": "nope"}, ["--status", "nope"],
                          "status", f"status: no status 'nope'; the statuses are: {STATUSES}"),
    "a NUL in the search": ({"q": "ord\x00er"}, ["--search", "ord\x00er"],
                            "q", "search: NUL characters cannot be stored"),
}


def console_answer(door, query: dict) -> tuple[list[int], list[str]]:
    page = door.console.get("/runs/", query).content.decode()
    listed = sorted({int(pk) for pk in re.findall(r'href="/runs/(\d+)/"', page)})
    return listed, [html.unescape(p) for p in
                    re.findall(r"<li>Invalid filter field ([^<]*)</li>", page)]


def cli_listed(*arguments: str) -> list[int]:
    out = io.StringIO()
    call_command("list_runs", "--user", "olga", "--json", *arguments, stdout=out)
    return sorted(r["id"] for r in json.loads(out.getvalue())["runs"])


@pytest.mark.parametrize("case", list(CASES))
def test_each_door_refuses_it_in_the_same_words(case, doors, script):  # noqa: F811
    query, arguments, parameter, words = CASES[case]
    STATES["failed_write"](script)
    runs_before = Run.objects.count()

    assert console_answer(doors, query) == ([], [words])

    api = doors.api.get("/api/runs", query)
    assert api.status_code == 422
    body = api.json()
    assert body["error"] == "invalid_request"
    assert [e["msg"] for e in body["errors"] if e["loc"] == ["query", parameter]] == [words]
    assert "runs" not in body

    with pytest.raises(CommandError) as refused:
        cli_listed(*arguments)
    assert str(refused.value) == f"--{words}. Nothing was done."  # the option named
    assert "\n" not in str(refused.value)
    assert Run.objects.count() == runs_before


def test_a_status_the_runs_have_still_lists_theirs(doors, script):  # noqa: F811
    run = STATES["failed_write"](script)
    STATES["waiting_for_event"](script)
    run.refresh_from_db()

    assert console_answer(doors, {"status": run.status}) == ([run.pk], [])
    assert [r["id"] for r in doors.api.get("/api/runs", {"status": run.status}).json()["runs"]] \
        == [run.pk]
    assert cli_listed("--status", run.status) == [run.pk]
