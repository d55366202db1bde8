"""Arguments that are JSON nested deeper than Python reads it are no arguments: the call is
invalid (kept as evidence, never executed, the model told), the turn is stored once and the
agent goes on; the model is not asked the same turn again at every attempt."""

import pytest

from demo.sandbox.models import ModelCall
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AgentTurn, RunStatus, ToolCall
from tests.agent_runs import advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)
DEEP = "[" * 5000 + "]" * 5000


def test_a_call_with_arguments_nested_too_deep_is_invalid_and_the_agent_goes_on(
        live_sandbox, monkeypatch):
    seen = scripted(monkeypatch,
                    ModelTurn(content="", tool_calls=[
                        {"id": "a", "name": "read-invoice", "arguments": DEEP}]),
                    ModelTurn(content="Could not read it.", tool_calls=[]))
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    (call,) = ToolCall.objects.filter(step__run=run)
    assert call.status == "invalid" and call.attempt == 0
    assert "nested too deep" in call.error_message
    assert AgentTurn.objects.filter(step__run=run).count() == 2 == len(seen)
    told = seen[1][-1]
    assert told["role"] == "tool" and "nested too deep" in told["content"]
    assert ModelCall.objects.count() == 0  # the scripted model answered; nothing else was
