"""What a step or tool returns, or a remote system says in an error, may hold what PostgreSQL
cannot store (a NUL in text extracted from a PDF, a lone surrogate, NaN or Infinity, a
nesting deeper than any parser goes). The outcome checkpoint must still commit: the value is
refused as an unclassified failure naming where it is, the error text is written out visibly,
and the run goes to a person at once instead of failing the same checkpoint at every
attempt."""

import dataclasses

import pytest

from runs.agents import agent_loop
from runs.definitions.definition import StepResult
from runs.execution import executor
from runs.machine.storable import value_problem
from runs.models import AttentionReason, ErrorClass, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import NoteArgs, assist

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_read_step_returning_a_nul_fails_at_once_naming_where(script):
    script.reset()
    run = new_run()
    script.plan["fetch"] = [{"lines": [{"text": "Total\x00 42"}]}]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    fetch = step(run, "fetch")
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    assert fetch.status == StepStatus.FAILED and fetch.error_class == ErrorClass.UNCLASSIFIED
    assert "cannot be stored" in fetch.error_message and "$.lines[0].text" in fetch.error_message
    # Called once; no later step began.
    assert [call[0] for call in script.calls] == ["fetch"]
    assert run.lease_owner == ""


@pytest.mark.parametrize("number", [float("nan"), float("inf"), float("-inf")])
def test_a_step_returning_a_number_that_is_not_finite_fails_at_once_naming_where(script,
                                                                                 number):
    # JSON has no NaN or Infinity: jsonb refuses them, which would fail the checkpoint.
    script.reset()
    run = new_run()
    script.plan["fetch"] = [{"lines": [{"text": "Total", "amount": number}]}]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    fetch = step(run, "fetch")
    assert fetch.status == StepStatus.FAILED and fetch.error_class == ErrorClass.UNCLASSIFIED
    assert "not a finite number" in fetch.error_message
    assert "$.lines[0].amount" in fetch.error_message
    assert [call[0] for call in script.calls] == ["fetch"]
    assert run.lease_owner == ""


def test_a_write_whose_result_cannot_be_stored_is_not_sent_twice(script):
    script.reset()
    run = new_run()
    script.plan["create-task"] = [StepResult({"ref": "T-1", "note": "\udc80"}, remote_ref="T-1")]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    task = step(run, "create-task")
    assert task.error_class == ErrorClass.UNCLASSIFIED and "$.note" in task.error_message
    assert "surrogate" in task.error_message
    assert [call[0] for call in script.calls] == ["fetch", "classify", "create-task"]
    assert step(run, "post-ledger").attempt == 0


def test_an_error_text_holding_a_nul_is_recorded_with_the_nul_written_out(script):
    script.reset()
    run = new_run()
    script.plan["fetch"] = [ValueError("bad byte \x00 in response")]
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    fetch = step(run, "fetch")
    assert fetch.status == StepStatus.FAILED
    assert "bad byte \\x00 in response" in fetch.error_message
    assert run.status == RunStatus.ATTENTION and run.lease_owner == ""


def test_a_model_output_with_a_nul_that_fails_its_schema_is_kept_written_out(script):
    script.reset()
    run = new_run()
    script.plan["classify"] = [{"category": 1, "note": "\x00"}, {"category": 2, "note": "\x00"}]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    classify = step(run, "classify")
    assert classify.format_failures == 2
    assert "\\x00" in classify.result["invalid_output"]


def test_a_tool_returning_a_nul_fails_unclassified():
    tool = dataclasses.replace(assist.tools["write-note"],
                               fn=lambda ctx, args: {"note": "half\x00written"})
    outcome = agent_loop.call_tool(tool, None, NoteArgs(text="x"))
    assert not outcome.succeeded and outcome.error.error_class == ErrorClass.UNCLASSIFIED
    assert outcome.error.message.startswith("tool returned a value that cannot be stored")
    assert "$.note" in outcome.error.message


def test_every_problem_is_named_with_its_place():
    assert value_problem({"a": [1, "ok", {"b": "x\x00"}]}) == \
        "NUL characters cannot be stored (at $.a[2].b)"
    assert value_problem({"k\x00": 1}) == "NUL characters cannot be stored (a key of $)"
    assert value_problem({"when": object()}).startswith("Object of type object")
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert value_problem(deep)
    assert value_problem({"fine": ["text", 1, 2.5, None, True]}) is None


# Keys of types that do not compare: JSON stores them ("1" and "b"), but the record of the
# attempt digests the result with its keys sorted (attempts.result_digest), which cannot
# order them: the checkpoint would fail at every attempt.
MIXED_KEYS = {1: "a", "b": 2}


def test_a_read_step_returning_keys_of_mixed_types_fails_once_naming_where(script):
    script.reset()
    run = new_run()
    script.plan["fetch"] = [{"lines": [MIXED_KEYS]}]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    fetch = step(run, "fetch")
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    assert fetch.status == StepStatus.FAILED and fetch.error_class == ErrorClass.UNCLASSIFIED
    assert fetch.error_message == (
        "step returned a value that cannot be stored: keys of types that cannot be put in "
        "order (int, str) (the keys of $.lines[0])")
    assert [call[0] for call in script.calls] == ["fetch"]
    assert run.lease_owner == ""


def test_a_write_returning_keys_of_mixed_types_is_not_sent_again(script):
    script.reset()
    run = new_run()
    script.plan["create-task"] = [StepResult(MIXED_KEYS, remote_ref="T-1")]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    task = step(run, "create-task")
    # It returned, so it may have happened: unknown, for a person, never sent again.
    assert task.status == StepStatus.UNKNOWN and task.error_class == ErrorClass.UNCLASSIFIED
    assert run.status == RunStatus.ATTENTION
    assert "(the keys of $)" in task.error_message
    assert [call[0] for call in script.calls] == ["fetch", "classify", "create-task"]
    assert step(run, "post-ledger").attempt == 0
    assert run.lease_owner == ""


def test_keys_that_can_be_ordered_pass():
    assert value_problem({1: "a", 2.5: "b", False: "c"}) is None
    assert value_problem({"a": {"x": 1}, "b": [{None: 1}]}) is None
    assert value_problem({"a": [{None: 1, "n": 2}]}).endswith("(the keys of $.a[0])")


# A reference names the effect: one cut to fit its column could name another effect, so a
# reference too long to keep is refused whole, by the one rule a lookup's answer meets too.
TOO_LONG_REF = "T-" + "7" * 400


def test_a_write_returning_a_reference_too_long_to_keep_is_refused_not_cut(script):
    script.reset()
    run = new_run()
    script.plan["create-task"] = [StepResult({"ref": "T-1"}, remote_ref=TOO_LONG_REF)]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    task = step(run, "create-task")
    # It returned, so it may have happened: unknown, for a person, never sent again.
    assert task.status == StepStatus.UNKNOWN and task.error_class == ErrorClass.UNCLASSIFIED
    assert task.error_message == (
        "step returned a value that cannot be stored: it is 402 characters long, longer than "
        "the 300 kept (in its remote reference)")
    assert task.remote_ref == ""  # not a cut reference that could name another task
    assert [call[0] for call in script.calls] == ["fetch", "classify", "create-task"]
    assert step(run, "post-ledger").attempt == 0
    assert run.lease_owner == ""


def test_a_reference_as_long_as_its_column_is_kept_whole(script):
    script.reset()
    run = new_run()
    ref = "T-" + "7" * 298
    script.plan["create-task"] = [StepResult({"ref": "T-1"}, remote_ref=ref)]
    executor.advance_run(run.pk, worker="w1")
    task = step(run, "create-task")
    assert task.status == StepStatus.SUCCEEDED and task.remote_ref == ref


def test_a_tool_returning_a_reference_too_long_to_keep_fails_unclassified():
    tool = dataclasses.replace(assist.tools["write-note"],
                               fn=lambda ctx, args: StepResult({"note": "n"}, TOO_LONG_REF))
    outcome = agent_loop.call_tool(tool, None, NoteArgs(text="x"))
    assert not outcome.succeeded and outcome.error.error_class == ErrorClass.UNCLASSIFIED
    assert "402 characters long, longer than the 300 kept" in outcome.error.message
