"""A tool's lookup by key may answer with what the call's row cannot keep (a reference with
a NUL, longer than its column or no text at all; a result holding NaN, a NUL or an object
JSON has no form for). It is a lookup that could not tell, naming the problem: the call
stays unknown and the run waits for a person, instead of failing the checkpoint that would
record it at every attempt."""

import pytest

from runs.agent_models import ToolCall
from runs.agents import agent_loop
from runs.definitions.definition import Found
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import Classified
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, Run, RunStatus
from tests.agent_runs import ACTOR
from tests.workflows import write_note

pytestmark = pytest.mark.django_db

ANSWERS = {
    "ref with NUL": (Found("NOTE\x00-1"), "NUL"),
    "ref no text": (Found({"n": float("nan")}), "no text"),
    "ref too long": (Found("N" * 301), "301 characters"),
    "result with NaN": (Found("NOTE-1", result={"n": float("nan")}), "not a finite number"),
    "result with NUL": (Found("NOTE-1", result={"n": "a\x00b"}), "NUL"),
    "result an object": (Found("NOTE-1", result={"n": object()}), "not JSON serializable"),
}


@pytest.mark.parametrize("answer, problem", ANSWERS.values(), ids=ANSWERS.keys())
def test_an_unstorable_lookup_answer_could_not_tell(script, monkeypatch, answer, problem):
    script.reset()
    turns = [ModelTurn(content="", tool_calls=[{"id": "c0", "name": "write-note",
                                                "arguments": '{"text": "a"}'}])]
    asked = []

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        return turns.pop(0) if turns else ModelTurn(content="done", tool_calls=[])

    sent, looked = [], []

    def timed_out(tool, ctx, args):
        sent.append(ctx.key)
        return transitions.Outcome(succeeded=False, error=Classified(
            ErrorClass.UNKNOWN, "timed out after sending"))

    def lookup(ctx, args):
        looked.append(ctx.key)
        return answer

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    monkeypatch.setattr(agent_loop, "call_tool", timed_out)
    monkeypatch.setattr(write_note, "reconcile_fn", lookup)
    run, _ = transitions.start_run(workflow="test-agent", business_key="odd-lookup",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    assert executor.advance_run(run.pk, worker="w1") is not None
    run = Run.objects.get(pk=run.pk)
    call = ToolCall.objects.get(step__run=run)
    assert len(sent) == 1 and len(looked) == 1 and len(asked) == 1
    assert call.status == "unknown" and call.remote_ref == ""
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME
    assert problem in run.status_message and "could not tell" in run.status_message
    assert "\x00" not in run.status_message
