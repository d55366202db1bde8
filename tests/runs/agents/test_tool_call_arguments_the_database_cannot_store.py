"""A model is a neighbour that may misbehave: the arguments it writes for a tool call may hold
what Python's JSON reader takes but PostgreSQL's jsonb refuses (NaN, Infinity, a literal too
large for a float) or text it cannot store (a NUL). The turn is still stored: the call is
invalid (a model format error, as arguments that are not JSON), its arguments kept as text
with the problem written out, the tool never called; the checkpoint does not fail at every
attempt."""

import pytest

from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import ErrorClass, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db


def _asks_once(arguments: str):
    turns = [ModelTurn(content="", tool_calls=[{"id": "c0", "name": "write-note",
                                                "arguments": arguments}])]
    return lambda client, spec, conversation, **kw: turns.pop(0) if turns else ModelTurn(
        content="done", tool_calls=[])


@pytest.mark.parametrize("arguments, problem", [
    ('{"text": NaN}', "the arguments hold NaN, not a finite number"),
    ('{"text": "a", "weight": Infinity}', "the arguments hold Infinity, not a finite number"),
    ('{"text": "a", "weight": 1e400}', "the arguments hold 1e400, not a finite number"),
    ('{"text": "half\\u0000written"}', "the arguments cannot be stored: NUL characters"),
])
def test_the_call_is_invalid_and_its_tool_is_never_called(script, monkeypatch, arguments,
                                                          problem):
    script.reset()
    monkeypatch.setattr(agent_loop, "ask_model", _asks_once(arguments))
    run, _ = transitions.start_run(workflow="test-agent", business_key="odd-args",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")
    call = ToolCall.objects.get(step__run=run)
    assert call.status == "invalid" and call.error_class == ErrorClass.MODEL_FORMAT
    assert call.error_message.startswith(problem)
    assert set(call.arguments) == {"unparsed"} and "\x00" not in call.arguments["unparsed"]
    assert not [name for name, *_ in script.calls if name.startswith("write-note")]
