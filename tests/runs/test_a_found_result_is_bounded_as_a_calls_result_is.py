"""A lookup by key that finds the effect may bring its result along (Found(ref, result)). That
result is kept by the one rule of a call's result (runs.machine.artifacts.kept_result), as
the step's or tool's own result would have been: above RUNS_RESULT_INLINE_BYTES it is written
once as an artifact and the row keeps its reference; above RUNS_RESULT_MAX_BYTES nobody can
record it, so, as with any lookup answer the database cannot store, the lookup could not
tell: the outcome stays unknown and the run waits for a person, who is told the size and the
limit (runs.machine.lookups.kept_answer)."""

import pytest

from runs.agent_models import ToolCall
from runs.agents import agent_loop
from runs.definitions.definition import Found
from runs.execution import executor
from runs.machine import artifacts, transitions
from runs.machine.errors import Classified
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, StepStatus
from tests.agent_runs import ACTOR
from tests.factories import new_run, step
from tests.workflows import orders, write_note

pytestmark = pytest.mark.django_db(transaction=True)

INLINE, MAX = 1024, 8 * 1024


@pytest.fixture(autouse=True)
def limits(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.RUNS_RESULT_INLINE_BYTES = INLINE
    settings.RUNS_RESULT_MAX_BYTES = MAX
    return tmp_path / "artifacts"


def _step_found(script, monkeypatch, result) -> tuple[Run, list]:
    """A write whose outcome is unknown, then found by its key with `result`."""
    script.reset()
    asked = []

    def lookup(ctx):
        asked.append(ctx.key)
        return Found("M-1", result)

    monkeypatch.setattr(orders.step("create-task"), "reconcile_fn", lookup)
    script.plan["create-task"] = ["effect-then-raise"]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk), asked


def test_a_steps_found_result_over_the_limit_leaves_the_outcome_unknown_for_a_person(
        script, monkeypatch, limits):
    run, asked = _step_found(script, monkeypatch, {"blob": "x" * MAX})
    task = step(run, "create-task")
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert task.status == StepStatus.UNKNOWN  # never found on an answer nobody can record
    assert task.remote_ref == "" and task.result is None
    for said in (task.error_message, run.status_message):
        assert "reconciliation could not tell" in said
        assert f"the result is {MAX + 11:,} bytes" in said  # {"blob":"…"} around it
        assert f"over the limit of {MAX:,} bytes (RUNS_RESULT_MAX_BYTES)" in said
    assert not limits.exists()  # nothing written apart either
    # Asked once; nothing asked or sent again, nothing after it began.
    assert asked == [task.idempotency_key]
    assert step(run, "post-ledger").attempt == 0
    assert executor.advance_run(run.pk, worker="w1") is None
    assert len(asked) == 1


def test_a_steps_large_found_result_is_kept_apart_and_the_step_succeeds(script, monkeypatch):
    run, asked = _step_found(script, monkeypatch, {"blob": "x" * (INLINE + 1)})
    task = step(run, "create-task")
    assert task.status == StepStatus.SUCCEEDED and task.remote_ref == "M-1"
    assert artifacts.is_artifact(task.result) and task.result["size"] == INLINE + 12
    assert artifacts.load(task.result) == {"blob": "x" * (INLINE + 1)}
    assert asked == [task.idempotency_key]


def _tool_found(script, monkeypatch, result) -> tuple[Run, ToolCall, list]:
    """An agent's tool call whose outcome is unknown, then found by its key with `result`."""
    script.reset()
    turns = [ModelTurn(content="", tool_calls=[{"id": "c0", "name": "write-note",
                                                "arguments": '{"text": "a"}'}])]

    def ask_model(client, spec, conversation, **kw):
        return turns.pop(0) if turns else ModelTurn(content="done", tool_calls=[])

    looked = []

    def timed_out(tool, ctx, args):
        return transitions.Outcome(succeeded=False, error=Classified(
            ErrorClass.UNKNOWN, "timed out after sending"))

    def lookup(ctx, args):
        looked.append(ctx.key)
        return Found("NOTE-1", result)

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    monkeypatch.setattr(agent_loop, "call_tool", timed_out)
    monkeypatch.setattr(write_note, "reconcile_fn", lookup)
    run, _ = transitions.start_run(workflow="test-agent", business_key="found-large",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")
    return Run.objects.get(pk=run.pk), ToolCall.objects.get(step__run=run), looked


def test_a_tool_calls_found_result_over_the_limit_leaves_the_call_unknown_for_a_person(
        script, monkeypatch, limits):
    run, call, looked = _tool_found(script, monkeypatch, {"blob": "x" * MAX})
    assert call.status == "unknown" and call.remote_ref == "" and call.result is None
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert "could not tell" in run.status_message
    assert f"over the limit of {MAX:,} bytes (RUNS_RESULT_MAX_BYTES)" in run.status_message
    assert not limits.exists()
    assert looked == [call.idempotency_key]


def test_a_tool_calls_large_found_result_is_kept_apart(script, monkeypatch):
    run, call, looked = _tool_found(script, monkeypatch, {"blob": "x" * (INLINE + 1)})
    assert call.status == "succeeded" and call.remote_ref == "NOTE-1"
    assert artifacts.is_artifact(call.result) and call.result["size"] == INLINE + 12
    assert artifacts.load(call.result) == {"blob": "x" * (INLINE + 1)}
    assert looked == [call.idempotency_key]
