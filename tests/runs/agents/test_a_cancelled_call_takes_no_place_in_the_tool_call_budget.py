"""A call a person cancelled was never made: it spends none of the agent's tool-call budget,
by the rule a turn is judged by (agent_budgets.budget_spent) and by the check made before each
call (agent_loop.past_call_budget). The second placed a call among all the step's calls,
the cancelled ones included: with the first of 21 calls cancelled (20 left, the budget),
the last was refused as call 21 and the run stopped again, 19 notes made."""

import pytest
from django.contrib.auth import get_user_model

from audit.chain import Actor
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions import agent_budgets
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus, Step, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db

ASKED = 21  # test-agent's budget: 20 tool calls


def advance(run):
    for _ in range(3):
        executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run


def test_with_one_of_the_calls_past_the_budget_cancelled_the_rest_are_all_made(
        script, monkeypatch):
    script.reset()
    answers = [ModelTurn(content="", tool_calls=[
        {"id": f"c{i}", "name": "write-note", "arguments": f'{{"text": "note {i}"}}'}
        for i in range(ASKED)])]

    def ask_model(client, spec, conversation, **kw):
        return answers.pop(0) if answers else ModelTurn(content="done", tool_calls=[])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run, _ = transitions.start_run(workflow="test-agent", business_key="cancel-first-call",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    run = advance(run)
    assert run.status == RunStatus.ATTENTION and "21 calls, at most 20" in run.status_message

    # The person cancels one call (the first: a duplicate note they do not want), which
    # brings the calls to be made to exactly the budget.
    person = Actor.for_user(get_user_model().objects.create_user("operator"))
    first = ToolCall.objects.get(step__run=run, call_id="c0")
    transitions.cancel_tool_call(run.pk, step_name="assist", call_ref=first.ref,
                                 actor=person, reason="not wanted")
    step = Step.objects.get(run=run, name="assist")
    spec = registry.get("test-agent", 1).step("assist")
    assert agent_budgets.budget_spent(step, spec) is None  # within budget by the turn's rule
    transitions.resume(run.pk, actor=person, reason="20 notes, within the budget")
    run = advance(run)

    made = [key for name, key, _ in script.calls if name == "write-note"]
    # 20 calls to make, 20 allowed: every one is made and the agent finishes.
    assert run.status == RunStatus.COMPLETED, (run.status, run.status_message, len(made))
    assert len(made) == 20
