"""A model may ask for more tool calls in one turn than its agent's budget allows. The turn
is stored and the run stops for a person; a person's resume then makes the calls within the
budget, once each, and never one past it: the run stops again, naming the first call past
the budget, which stays unmade until a person cancels it or ends the run."""

import pytest
from django.contrib.auth import get_user_model

from audit.chain import Actor
from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, RunStatus, Step, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db

ASKED = 25  # test-agent's budget: 20 tool calls


def _many_calls_then_done(asked: list):
    answers = [ModelTurn(content="", tool_calls=[
        {"id": f"c{i}", "name": "write-note", "arguments": f'{{"text": "note {i}"}}'}
        for i in range(ASKED)])]

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        return answers.pop(0) if answers else ModelTurn(content="done", tool_calls=[])
    return ask_model


def _advance(run):
    for _ in range(3):
        executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run


def test_a_resumed_run_makes_the_calls_within_the_budget_and_none_past_it(script, monkeypatch):
    script.reset()
    asked = []
    monkeypatch.setattr(agent_loop, "ask_model", _many_calls_then_done(asked))
    run, _ = transitions.start_run(workflow="test-agent", business_key="many-calls",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    run = _advance(run)
    assert run.status == RunStatus.ATTENTION
    assert "the model asked for 25 calls, at most 20" in run.status_message
    assert script.calls == []
    person = Actor.for_user(get_user_model().objects.create_user("operator"))

    for _ in range(2):  # a second resume changes nothing either
        transitions.resume(run.pk, actor=person, reason="go on with what was asked")
        run = _advance(run)
        assert run.status == RunStatus.ATTENTION
        assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
        assert ("tool call 0.20 (write-note) is call 21 of the 25 the model asked for and "
                "nobody cancelled") in run.status_message
        step = Step.objects.get(run=run, name="assist")
        assert step.status == "failed" and step.error_class == ErrorClass.EXHAUSTED
        # The twenty within the budget, each made once; none past it.
        made = [key for name, key, _ in script.calls if name == "write-note"]
        assert len(made) == len(set(made)) == 20
        calls = ToolCall.objects.filter(step__run=run).order_by("turn", "index")
        assert [c.status for c in calls] == ["succeeded"] * 20 + ["pending"] * 5
        assert all(c.attempt == 0 and c.started_at is None for c in calls[20:])
    assert len(asked) == 1  # the model was never asked again
    assert AuditRecord.objects.filter(run=run, action="attention").count() == 3
