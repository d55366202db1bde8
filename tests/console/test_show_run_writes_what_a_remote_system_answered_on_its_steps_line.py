"""show_run prints one line a step. A step's remote reference is what a remote system
answered (kept as returned: only NUL, bad unicode and length are refused): written raw, a
reference holding a line break forged a step line, and one holding an escape sequence
reached the operator's terminal. It is written as the errors are, its hidden characters as
their codes."""

import io

import pytest
from django.core.management import call_command

from runs.definitions.definition import StepResult
from runs.execution import executor
from tests.factories import new_run

pytestmark = pytest.mark.django_db

FORGED = "T-1\n  post-ledger              succeeded            attempt 1  ref L-9"


def shown(run) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), stdout=out)
    return out.getvalue()


def test_a_reference_with_a_line_break_stays_on_its_steps_line(script):
    script.plan["create-task"] = [StepResult({"ref": "T-1"}, remote_ref=FORGED)]
    script.plan["post-ledger"] = [RuntimeError("ledger down")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")

    lines = shown(run).splitlines()

    task = [line for line in lines if line.startswith("  create-task ")]
    assert len(task) == 1 and "T-1\\u000a  post-ledger" in task[0]
    ledger = [line for line in lines if line.startswith("  post-ledger ")]
    assert len(ledger) == 1 and "L-9" not in ledger[0] and "succeeded" not in ledger[0]


def test_a_reference_with_an_escape_sequence_never_reaches_the_terminal(script):
    script.plan["create-task"] = [StepResult({"ref": "T-1"}, remote_ref="T-1\x1b[2J\x1b[31m")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")

    text = shown(run)

    assert "\x1b" not in text
    assert "ref T-1\\u001b[2J\\u001b[31m" in text
