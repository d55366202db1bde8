"""A tool call keeps the impact its tool had when it was made (ToolCall.impact), and every
rule weighs that: four eyes (operator_rules.high_impact_effects), the pause of the run's
compensation before a high-impact undo (compensation.asks_a_person), and the one-call Undo
tool call (tool_call_rules.call_refusal). The last asked the code's tool instead: once a
release read the tool as low impact, a call made as high impact was undone by one person,
unconfirmed, while the run's other rules still weighed it as high."""

import pytest
from django.contrib.auth import get_user_model

from audit.chain import Actor
from runs.agents import agent_loop
from runs.agents.tool_call_undo import undo_tool_call
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.machine.transitions.agent_calls import ModelTurn
from runs.machine.transitions.compensation import asks_a_person
from runs.machine.transitions.operator_rules import high_impact_effects
from runs.models import RunStatus, Step, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db


def test_a_call_made_high_impact_is_not_undone_alone_by_one_person(script, monkeypatch):
    script.reset()
    tool = registry.get("test-agent", 1).step("assist").tools["write-note"]
    monkeypatch.setattr(tool, "impact", "high")
    # Below its approval threshold, as the demo's small ledger postings are.
    monkeypatch.setattr(tool, "approve_if", lambda args: False)
    answers = [ModelTurn(content="", tool_calls=[
        {"id": "c0", "name": "write-note", "arguments": '{"text": "pay the vendor"}'}]),
        # Then an undeclared tool: the run stops for a person (by design).
        ModelTurn(content="", tool_calls=[{"id": "c1", "name": "wire-money",
                                           "arguments": "{}"}])]

    def ask_model(client, spec, conversation, **kw):
        return answers.pop(0)

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run, _ = transitions.start_run(workflow="test-agent", business_key="impact-kept",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION, run.status_message
    call = ToolCall.objects.get(step__run=run, call_id="c0")
    assert call.status == "succeeded" and call.impact == "high"
    # A release reads the tool as low impact now (no new version).
    monkeypatch.setattr(tool, "impact", "low")

    steps = list(Step.objects.filter(run=run))
    # The run's own rules still weigh the call as it was made: high impact.
    assert [e for e in high_impact_effects(steps)]
    assert asks_a_person(call)
    person = Actor.for_user(get_user_model().objects.create_user("operator"))
    # So one person undoing it alone, unconfirmed, is refused as for any high-impact call.
    with pytest.raises(TransitionNotAllowed):
        undo_tool_call(run.pk, step_name="assist", call_ref=call.ref, actor=person,
                       reason="undo it")
    assert ToolCall.objects.get(pk=call.pk).status == "succeeded"
