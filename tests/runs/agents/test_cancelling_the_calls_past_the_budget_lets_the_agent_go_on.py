"""The run that stopped at a tool call past the agent's budget names the way on: a person
cancels the calls past it (or ends the run). Once they are cancelled, a resume asks the
model again, telling it which calls a person cancelled; a cancelled call was never made,
so it spends none of the budget, and nothing past the budget is made."""

import json

import pytest
from django.contrib.auth import get_user_model

from audit.chain import Actor
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus, Step, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db

ASKED = 25  # test-agent's budget: 20 tool calls


def _advance(run):
    for _ in range(3):
        executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run


def test_once_the_calls_past_the_budget_are_cancelled_a_resume_asks_the_model_again(
        script, monkeypatch):
    script.reset()
    asked = []
    answers = [ModelTurn(content="", tool_calls=[
        {"id": f"c{i}", "name": "write-note", "arguments": f'{{"text": "note {i}"}}'}
        for i in range(ASKED)])]

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        return answers.pop(0) if answers else ModelTurn(content="done", tool_calls=[])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run, _ = transitions.start_run(workflow="test-agent", business_key="cancel-past-budget",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    run = _advance(run)
    person = Actor.for_user(get_user_model().objects.create_user("operator"))
    transitions.resume(run.pk, actor=person, reason="make those within the budget")
    run = _advance(run)
    assert run.status == RunStatus.ATTENTION
    assert "is call 21 of the 25 the model asked for and nobody cancelled" in run.status_message
    assert "a person cancels it" in run.status_message

    past = list(ToolCall.objects.filter(step__run=run, status="pending"))
    assert len(past) == 5
    for call in past:
        transitions.cancel_tool_call(run.pk, step_name="assist", call_ref=call.ref,
                                     actor=person, reason="past the budget")
    transitions.resume(run.pk, actor=person, reason="go on without them")
    run = _advance(run)

    assert len(asked) == 2, run.status_message  # asked again, once
    told = {m["tool_call_id"]: json.loads(m["content"]) for m in asked[1]
            if m.get("role") == "tool"}
    assert all("a person cancelled this call" in told[c.call_id]["error"] for c in past)
    assert Step.objects.get(run=run, name="assist").status == "succeeded"
    made = [key for name, key, _ in script.calls if name == "write-note"]
    assert len(made) == len(set(made)) == 20
    assert ToolCall.objects.filter(step__run=run, status="cancelled").count() == 5
    assert not ToolCall.objects.filter(step__run=run, status="pending").exists()
