"""A model that asks for two tool calls under one id in one turn: a result is paired with its
call by id, so the two could not be told apart (a real endpoint refuses the conversation
that follows, once both effects are made). The first is made; the later one is invalid, kept
under an id of its own and never executed, and the model is told why, in a conversation
whose ids are distinct."""

import pytest

from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import ErrorClass, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db


def _call(text):
    return {"id": "call_1", "name": "write-note", "arguments": f'{{"text": "{text}"}}'}


def test_the_later_of_two_calls_under_one_id_is_invalid_and_never_executed(script,
                                                                         monkeypatch):
    script.reset()
    answers = [ModelTurn(content="", tool_calls=[_call("a"), _call("b")])]
    asked = []

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        return answers.pop(0) if answers else ModelTurn(content="done", tool_calls=[])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run, _ = transitions.start_run(workflow="test-agent", business_key="one-id",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")

    first, later = ToolCall.objects.filter(step__run=run, turn=0).order_by("index")
    assert first.status == "succeeded" and first.call_id == "call_1"
    assert later.status == "invalid" and later.error_class == ErrorClass.MODEL_FORMAT
    assert "repeats tool call 0's" in later.error_message
    assert later.call_id != "call_1"
    # One note written, not two.
    assert [name for name, *_ in script.calls if name == "write-note"] == ["write-note"]
    # The conversation the model was asked next pairs each result with a distinct call.
    answered = [m for m in asked[-1] if m["role"] == "tool"]
    assert sorted(m["tool_call_id"] for m in answered) == sorted(["call_1", later.call_id])
    assert any("repeats tool call 0's" in m["content"] for m in answered)
