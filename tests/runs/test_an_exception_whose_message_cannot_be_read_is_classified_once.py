"""An exception raised by step code (or a tool, a lookup, an undo) whose message cannot be
read (its __str__ raises) is still classified, by its type, once: the checkpoint commits and
the run goes where its class sends it, instead of the classification raising inside the
except block at every attempt (a write sent again after each take-back)."""

import dataclasses

import pytest

from runs.agents import agent_loop
from runs.definitions.definition import StepResult
from runs.execution import executor
from runs.machine.errors import ModelFormatError, TransientError, classify
from runs.machine.transitions.outcome import Outcome, unstorable_result
from runs.models import AttentionReason, ErrorClass, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import NoteArgs, assist

pytestmark = pytest.mark.django_db(transaction=True)


class BrokenError(Exception):
    def __str__(self):
        raise RuntimeError("no message here")


class BrokenTransient(TransientError):
    def __str__(self):
        raise RuntimeError("no message here")


class BadRepr:
    def __repr__(self):
        raise ValueError("no repr")


class BadRef(str):
    def __str__(self):
        raise RuntimeError("no text")


UNREADABLE = "(its message could not be read: RuntimeError: no message here)"


def test_classify_describes_it_by_its_type_and_keeps_its_class():
    assert classify(BrokenError()).error_class == ErrorClass.UNCLASSIFIED
    assert classify(BrokenError()).message == f"BrokenError {UNREADABLE}"
    transient = classify(BrokenTransient(retry_after=3))
    assert transient.error_class == ErrorClass.TRANSIENT and transient.retry_after == 3
    assert transient.message == f"BrokenTransient {UNREADABLE}"


def test_a_read_step_raising_it_fails_once(script):
    script.reset()
    run = new_run()
    script.plan["fetch"] = [BrokenError()]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    fetch = step(run, "fetch")
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    assert fetch.status == StepStatus.FAILED and fetch.error_class == ErrorClass.UNCLASSIFIED
    assert fetch.error_message == f"BrokenError {UNREADABLE}"
    assert [call[0] for call in script.calls] == ["fetch"]
    assert run.lease_owner == ""


def test_a_write_raising_a_transient_one_is_scheduled_by_its_class(script):
    script.reset()
    run = new_run()
    script.plan["create-task"] = [BrokenTransient()]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run.refresh_from_db()
    task = step(run, "create-task")
    assert task.status == StepStatus.SCHEDULED and task.error_class == ErrorClass.TRANSIENT
    assert task.error_message == f"BrokenTransient {UNREADABLE}"
    assert [call[0] for call in script.calls] == ["fetch", "classify", "create-task"]
    assert run.lease_owner == ""


def test_a_tool_raising_it_fails_unclassified():
    def broken(ctx, args):
        raise BrokenError()

    tool = dataclasses.replace(assist.tools["write-note"], fn=broken)
    outcome = agent_loop.call_tool(tool, None, NoteArgs(text="x"))
    assert not outcome.succeeded and outcome.error.error_class == ErrorClass.UNCLASSIFIED
    assert UNREADABLE in outcome.error.message


def test_a_rejected_model_output_whose_repr_raises_is_kept_by_its_type(script):
    script.reset()
    run = new_run()
    script.plan["classify"] = [ModelFormatError("bad", output=BadRepr()),
                               ModelFormatError("bad", output=BadRepr())]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    classified = step(run, "classify")
    assert classified.format_failures == 2
    assert classified.result["invalid_output"] == \
        "<a BadRepr whose repr raised ValueError: no repr>"
    assert [call[0] for call in script.calls] == ["fetch", "classify", "classify"]
    assert Outcome(succeeded=False, invalid_output=BadRepr()).invalid_output.startswith(
        "<a BadRepr")


def test_a_write_whose_remote_reference_cannot_be_read_is_not_sent_again(script):
    script.reset()
    run = new_run()
    script.plan["create-task"] = [StepResult({"ref": "T-1"}, remote_ref=BadRef("T-1"))]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    task = step(run, "create-task")
    # It returned, so it may have happened: unknown, for a person, never sent again.
    assert task.status == StepStatus.UNKNOWN and task.error_class == ErrorClass.UNCLASSIFIED
    assert "remote reference" in task.error_message
    assert "RuntimeError: no text" in task.error_message
    assert [call[0] for call in script.calls] == ["fetch", "classify", "create-task"]
    assert step(run, "post-ledger").attempt == 0


def test_unstorable_result_refuses_a_remote_reference_that_cannot_be_read():
    outcome = unstorable_result("tool", {"ref": "T-1"}, BadRef("T-1"))
    assert not outcome.succeeded and outcome.error.error_class == ErrorClass.UNCLASSIFIED
    assert outcome.error.message == (
        "tool returned a value that cannot be stored: it cannot be read as text "
        "(RuntimeError: no text) (in its remote reference)")
