"""show_run and run_history say of an approval step the workflow's rule approved what the
run page says: approved by the workflow's rule, no person was asked. Its reference only
names who approved, as a person's approval's does, and the history's record names the
worker as its actor: neither says on its own that nobody was asked."""

import io
import json

import pytest
from django.core.management import call_command

import tests.approvals.workflows  # noqa: F401  (registers test-approval-by-rule)
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db

SAID = "approved by the workflow's rule; no person was asked"


@pytest.fixture
def approved_by_rule(script) -> Run:
    script.reset()
    run = new_run("test-approval-by-rule", amount=20)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return run


def lines_of(command: str, run: Run, *options: str) -> list[str]:
    out = io.StringIO()
    call_command(command, str(run.pk), *options, stdout=out)
    return out.getvalue().splitlines()


def test_show_run_says_it_on_the_steps_line_and_of_no_other_step(approved_by_rule):
    lines = lines_of("show_run", approved_by_rule)
    (approve,) = [line for line in lines if line.split()[0] == "approve"]
    assert approve.endswith(f"ref approved by the workflow's rule  ({SAID})")
    assert sum(SAID in line for line in lines) == 1


def test_show_run_json_says_it_of_that_step_only(approved_by_rule):
    out = io.StringIO()
    call_command("show_run", str(approved_by_rule.pk), "--json", stdout=out)
    said = {s["name"]: s["approved_unasked"] for s in json.loads(out.getvalue())["steps"]}
    assert said == {"prepare": None, "approve": SAID, "pay": None}


def test_run_history_says_it_on_the_rules_record_only(approved_by_rule):
    lines = lines_of("run_history", approved_by_rule)
    (record,) = [line for line in lines if " approved_by_rule " in line]
    assert record.split()[5] == "approve" and record.endswith(f"  ({SAID})")
    assert sum(SAID in line for line in lines) == 1
