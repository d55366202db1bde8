"""A model may send a tool call without an id, or its arguments as a JSON object instead
of JSON text. The call is kept and run as sent, and the conversation sent back names each
call by the id its result carries and carries its arguments as JSON text: an endpoint
refuses a conversation whose result pairs with no call, or whose arguments are no text,
and the run would be asked the same refused conversation at every resume."""

import json

import pytest

from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AgentTurn, RunStatus, ToolCall
from tests.agent_runs import advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)


def test_calls_without_ids_and_with_object_arguments_are_paired_and_sent_as_text(
        live_sandbox, monkeypatch):
    seen = scripted(monkeypatch,
                    ModelTurn(content="", tool_calls=[
                        {"id": None, "name": "read-invoice", "arguments": {"number": "INV-2001"}},
                        {"id": "", "name": "read-invoice", "arguments": '{"number": "INV-1847"}'},
                    ]),
                    ModelTurn(content="Read both.", tool_calls=[]))
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    calls = list(ToolCall.objects.filter(step__run=run).order_by("index"))
    assert [c.status for c in calls] == ["succeeded", "succeeded"]
    assert [c.call_id for c in calls] == ["call_0_0", "call_0_1"]
    assert [c["id"] for c in AgentTurn.objects.get(step__run=run, index=0).tool_calls] == [
        "call_0_0", "call_0_1"]

    asked, told = seen[1][2], seen[1][3:]
    sent = asked["tool_calls"]
    assert [c["id"] for c in sent] == [m["tool_call_id"] for m in told] == ["call_0_0",
                                                                          "call_0_1"]
    assert all(isinstance(c["function"]["arguments"], str) for c in sent)
    assert json.loads(sent[0]["function"]["arguments"]) == {"number": "INV-2001"}
