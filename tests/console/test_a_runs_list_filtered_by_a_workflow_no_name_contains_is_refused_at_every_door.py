"""The runs list's workflow filter is all or part of a workflow's name. One that is part of
no name of a workflow whose runs the asker may see is refused at every door, naming the
workflows they may filter by: the API answers 400 `unknown_workflow`, manage.py list_runs a
one-line error, and the console's runs list shows it as an invalid filter and lists no run,
where it listed none and said nothing (a misspelt name read as "no run matches"). A part of
a name the asker may see still lists that workflow's runs at each door."""

import html
import io
import json
import re

import pytest
from django.core.management import CommandError, call_command

from tests.console.test_the_console_the_api_and_the_cli_answer_each_action_alike_in_each_state import (  # noqa: E501
    STATES,
    doors,  # noqa: F401 (a fixture)
)

pytestmark = pytest.mark.django_db


def _console(door, workflow: str) -> tuple[list[int], list[str]]:
    page = door.console.get("/runs/", {"workflow": workflow}).content.decode()
    listed = sorted({int(pk) for pk in re.findall(r'href="/runs/(\d+)/"', page)})
    return listed, [html.unescape(p) for p in
                    re.findall(r"<li>Invalid filter field ([^<]*)</li>", page)]


def _cli(workflow: str):
    out = io.StringIO()
    call_command("list_runs", "--user", "olga", "--json", "--workflow", workflow, stdout=out)
    return sorted(r["id"] for r in json.loads(out.getvalue())["runs"])


def test_a_part_of_no_name_is_refused_by_each_door(doors, script):  # noqa: F811
    STATES["failed_write"](script)

    listed, problems = _console(doors, "ordres")
    assert listed == []
    assert len(problems) == 1, problems
    assert "no workflow whose runs you may see has a name containing 'ordres'" in problems[0]
    assert "test-orders" in problems[0]

    api = doors.api.get("/api/runs", {"workflow": "ordres"})
    assert (api.status_code, api.json()["error"]) == (400, "unknown_workflow")
    assert "'ordres'" in api.json()["detail"]

    with pytest.raises(CommandError, match="name contains 'ordres'"):
        _cli("ordres")


def test_a_part_of_a_name_lists_its_runs_at_each_door(doors, script):  # noqa: F811
    run = STATES["failed_write"](script)
    STATES["waiting_for_event"](script)

    assert _console(doors, "orders") == ([run.pk], [])
    assert [r["id"] for r in doors.api.get("/api/runs", {"workflow": "orders"}).json()["runs"]] \
        == [run.pk]
    assert _cli("orders") == [run.pk]
