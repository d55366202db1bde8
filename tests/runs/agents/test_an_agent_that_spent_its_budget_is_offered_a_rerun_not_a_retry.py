"""An agent step that spent its budget (turns, tool calls or tokens) is counted in its
generation: a retry keeps the generation and stops again at once, without asking the model.
The run's recommendation is a re-run from that step, whose new generation asks the model
afresh; it offered the retry, which could not help."""

import pytest
from django.contrib.auth import get_user_model

from audit.chain import Actor
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, Run, RunStatus, Step
from runs.operator.guidance import recommend
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db


def never_done_until(asked: list, finished: list):
    """A model that calls a tool every turn until `finished` holds something."""

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        if finished:
            return ModelTurn(content="done", tool_calls=[])
        return ModelTurn(content="", tool_calls=[
            {"id": f"c{len(asked)}", "name": "write-note",
             "arguments": f'{{"text": "note {len(asked)}"}}'}])
    return ask_model


def advance(run):
    for _ in range(20):
        executor.advance_run(run.pk, worker="w1")
        run.refresh_from_db()
        if run.status != RunStatus.QUEUED:
            break
    return run


def test_the_rerun_is_offered_and_asks_the_model_afresh(script, monkeypatch):
    script.reset()
    asked, finished = [], []
    monkeypatch.setattr(agent_loop, "ask_model", never_done_until(asked, finished))
    run, _ = transitions.start_run(workflow="test-agent", business_key="talkative",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    run = advance(run)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
    person = Actor.for_user(get_user_model().objects.create_user("operator"))

    steps = list(Step.objects.filter(run=run))
    advice = recommend(run, steps)
    assert advice.meant == "rerun_from_step" and advice.action is not None
    assert advice.step == "assist"

    # What was offered before: the retry stops again at once, the model not asked.
    asked_before = len(asked)
    transitions.retry_step(run.pk, step_name="assist", actor=person, reason="try again")
    run = advance(run)
    assert run.attention_reason == AttentionReason.BUDGET_EXHAUSTED
    assert len(asked) == asked_before

    finished.append(True)
    transitions.rerun_from_step(run.pk, step_name="assist", actor=person,
                                reason="prompt changed")
    run = advance(Run.objects.get(pk=run.pk))
    assert run.status == RunStatus.COMPLETED
    assert len(asked) == asked_before + 1
