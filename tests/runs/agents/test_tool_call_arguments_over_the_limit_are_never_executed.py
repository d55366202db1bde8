"""A model may propose tool call arguments of any size, and a schema that ignores fields it
does not know lets a megabyte through. Arguments over RUNS_TOOL_ARGUMENTS_MAX_BYTES (as
JSON) are a schema error like any other: the call is never executed, the model is told in
its next turn how large they were and what the limit is, the refusal counts against the
agent's schema error budget, and the megabyte is kept neither in the rows nor in what is
sent back to the model. The demo's triage agent against the sandbox over real HTTP."""

import json

import pytest

from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.models import AgentTurn, AttentionReason, ErrorClass, RunStatus, Step, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)

MEGABYTE = 1024 * 1024
LIMIT = "over the limit of 65,536 bytes (RUNS_TOOL_ARGUMENTS_MAX_BYTES)"


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def _prompts() -> list[list[dict]]:
    return [json.loads(p) for p in ModelCall.objects.order_by("created_at", "pk")
            .values_list("prompt", flat=True)]


def _told(prompt: list[dict], call: ToolCall) -> dict | None:
    """What the model was told of `call` in one request, or None."""
    return next((json.loads(m["content"]) for m in prompt
                 if m.get("role") == "tool" and m.get("tool_call_id") == call.call_id), None)


def test_a_megabyte_of_arguments_is_never_executed_and_the_model_is_told_size_and_limit():
    run = advance(start_triage(notes="[sandbox-script: invoice-triage huge-args-once]"),
                  times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    refused, made = ToolCall.objects.filter(step__run=run, tool="open-approval-task") \
        .order_by("turn", "index")
    assert refused.status == "invalid" and refused.error_class == ErrorClass.MODEL_FORMAT
    assert refused.attempt == 0 and refused.started_at is None
    assert LIMIT in refused.error_message
    # The one task the tracker holds is the later call's, made once the model sent less.
    assert made.status == "succeeded"
    assert Task.objects.count() == 1 and Task.objects.get().idempotency_key == \
        made.idempotency_key
    # The model's next request says why, naming the size and the limit.
    prompts = _prompts()
    told = [_told(p, refused) for p in prompts]
    first = next(i for i, t in enumerate(told) if t is not None)
    assert "invalid call, not executed" in told[first]["error"]
    assert LIMIT in told[first]["error"] and "bytes, over the limit" in told[first]["error"]
    # Kept as evidence by its start, size and sha256: never whole, in the rows or the
    # requests that follow.
    assert refused.arguments["size"] > MEGABYTE and len(refused.arguments["sha256"]) == 64
    turn = AgentTurn.objects.get(step__run=run, index=refused.turn)
    assert len(json.dumps(turn.tool_calls)) < 10_000
    assert all(len(json.dumps(p)) < 100_000 for p in prompts[first:])


def test_arguments_over_the_limit_count_against_the_schema_error_budget():
    run = advance(start_triage(notes="[sandbox-script: invoice-triage huge-args-always]"),
                  times=20)
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    step = Step.objects.get(run=run, name="triage")
    assert step.error_class == ErrorClass.MODEL_FORMAT
    # The triage agent's budget is 2: the third refusal stops the run for a person.
    assert "3 tool calls had arguments that fail their schema (budget 2)" in step.error_message
    assert LIMIT in step.error_message
    calls = ToolCall.objects.filter(step__run=run, tool="open-approval-task")
    assert calls.count() == 3 and {c.status for c in calls} == {"invalid"}
    assert Task.objects.count() == 0 and LedgerEntry.objects.count() == 0
