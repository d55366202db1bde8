"""Tool call arguments that are JSON but hold a whole number longer than Python reads
(sys.get_int_max_str_digits) make the call invalid, never executed, and the model is told
what is wrong with them (the number's digits and the limit), as the API and the CLI tell a
person: not that its JSON is not JSON, which would have it send the same again."""

import json
import sys

import pytest

from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import ErrorClass, RunStatus, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db


def test_the_call_is_invalid_and_the_model_is_told_which_number(script, monkeypatch):
    script.reset()
    digits = sys.get_int_max_str_digits() + 1
    arguments = '{"text": "a", "copies": 1' + "0" * (digits - 1) + "}"
    answers = [ModelTurn(content="", tool_calls=[
        {"id": "c1", "name": "write-note", "arguments": arguments}])]
    asked = []

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        return answers.pop(0) if answers else ModelTurn(content="done", tool_calls=[])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run, _ = transitions.start_run(workflow="test-agent", business_key="long-number",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()

    assert run.status == RunStatus.COMPLETED, run.status_message
    (call,) = ToolCall.objects.filter(step__run=run)
    assert call.status == "invalid" and call.error_class == ErrorClass.MODEL_FORMAT
    assert f"{digits:,} digits" in call.error_message, call.error_message
    assert "not JSON" not in call.error_message
    assert not script.calls  # never executed
    (told,) = [m for m in asked[-1] if m["role"] == "tool"]
    assert f"{digits:,} digits" in json.loads(told["content"])["error"]
