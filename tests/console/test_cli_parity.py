"""The command line offers what the console and the API do: list and search runs with the
same filters and keyset paging, show one run, print its history, take any action (tool-call
actions included), each with --json."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from audit.models import AuditRecord
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _cli(*args) -> str:
    out = io.StringIO()
    call_command(*map(str, args), stdout=out)
    return out.getvalue()


def _json(*args):
    return json.loads(_cli(*args, "--json"))


def _failed_run(workflow="test-orders"):
    return place(new_run(workflow), status=RunStatus.ATTENTION,
                 step_statuses={"create-task": StepStatus.FAILED} if workflow == "test-orders"
                 else None)


def test_list_runs_filters_searches_and_pages_as_the_console_does(finance_operator):
    runs = [_failed_run() for _ in range(3)]
    saga = _failed_run("test-saga")
    new_run()  # queued
    seen, after = [], []
    while True:
        page = _json("list_runs", "--status", "attention", "--limit", "2", *after)
        seen += [r["id"] for r in page["runs"]]
        if page["next_cursor"] is None:
            break
        after = ["--after", page["next_cursor"]]
    assert sorted(seen) == sorted([r.pk for r in runs] + [saga.pk])
    mine = _json("list_runs", "--status", "attention", "--user", "fin")["runs"]
    assert sorted(r["id"] for r in mine) == sorted(r.pk for r in runs)
    found = _json("list_runs", "-q", runs[0].business_key)["runs"]
    assert [r["id"] for r in found] == [runs[0].pk] and found[0]["state"] == "needs_attention"
    text = _cli("list_runs", "--status", "attention", "--limit", "1")
    assert "next page: --after" in text
    with pytest.raises(CommandError, match="not a cursor"):
        _cli("list_runs", "--after", "yesterday")
    with pytest.raises(CommandError, match="--status: no status 'sleeping'"):
        _cli("list_runs", "--status", "sleeping")


def test_show_run_and_its_history_agree_with_the_action_taken(operator):
    run = _failed_run()
    shown = _json("show_run", run.pk)
    assert shown["state"] == "needs_attention"
    assert {s["name"]: s["status"] for s in shown["steps"]}["create-task"] == "failed"
    assert "retry_step" in [a["name"] for a in shown["operator_actions"]]

    done = _json("run_action", run.pk, "retry_step", "--user", "olga", "--step", "create-task",
                 "--reason", "tracker fixed")
    assert done["done"] is True and done["status"] == "queued"
    history = _json("run_history", run.pk)
    assert history["entries"][-1]["action"] == "step_retried"
    assert history["entries"][-1]["actor"] == "olga"
    assert [e["seq"] for e in history["entries"]] == list(
        range(1, Run.objects.get(pk=run.pk).audit_seq + 1))
    first = _json("run_history", run.pk, "--limit", "1")
    assert len(first["entries"]) == 1 and first["older"] == first["entries"][0]["seq"]
    older = _json("run_history", run.pk, "--limit", "1", "--before", first["older"])
    assert older["entries"][0]["seq"] == first["older"] - 1
    assert "step_retried" in _cli("run_history", run.pk)
    with pytest.raises(CommandError, match="no run"):
        _cli("show_run", 10**12)


def test_an_action_that_needs_a_second_person_answers_json_with_the_request(operator):
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED,
                               "post-ledger": StepStatus.SUCCEEDED})
    answer = _json("run_action", run.pk, "terminate", "--user", "olga", "--reason", "fraud")
    assert answer["done"] is False and answer["approval_request"]
    assert not AuditRecord.objects.filter(run=run, action="terminated").exists()
    offered = {a["action"]: a for a in _json("run_action", run.pk, "--user", "olga")}
    assert offered["terminate"]["offered"] and not offered["reopen"]["offered"]


def test_times_in_json_are_written_as_the_api_writes_them(operator, client):
    from datetime import datetime

    from api.tokens import token_create

    run = _failed_run()
    shown = _json("show_run", run.pk)
    history = _json("run_history", run.pk)
    _, plaintext = token_create(name="erp", workflows=["test-orders"])
    api = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}").json()
    times = [value for key, value in shown.items() if key.endswith("_at") and value]
    times += [entry["at"] for entry in history["entries"]]
    assert times, shown
    for text in times:
        assert "T" in text and " " not in text, text
        assert datetime.fromisoformat(text) is not None
    # The same instant as the API's, written alike (ISO 8601).
    shared = [key for key in shown if key.endswith("_at") and api.get(key)]
    assert shared
    assert all(shown[key] == api[key] for key in shared), [(shown[k], api[k]) for k in shared]
