"""An agent whose model sent arguments that fail their schema (or asked for more tool calls
than one turn may) more often than its schema error budget allows stops for a person, who is
advised to fix the prompt or the model and retry. The errors before the retry counted on:
whatever the model answered next, even a final answer, stopped the run again with the same
message, and no retry or resume could ever let it finish. A person's retry or resume now
starts a fresh budget, as it does a decision step's format failures: the model's good answer
completes the run, and a model that keeps failing is stopped again after the same budget.
The demo's triage agent, its model scripted, against the sandbox over real HTTP."""

import json

import pytest

from demo.sandbox.models import LedgerEntry, Task
from runs.agent_models import ToolCall
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, Run, RunStatus, Step
from runs.operator.actions import ActionInput
from runs.operator.guidance import recommend
from tests.agent_runs import ACTOR, advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)
DONE = ModelTurn(content="Nothing to open: the invoice is a duplicate.", tool_calls=[])


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def _invalid() -> ModelTurn:
    return ModelTurn(content="", tool_calls=[{"id": "x", "name": "open-approval-task",
                                              "arguments": json.dumps({"invoice": 5})}])


def _flood() -> ModelTurn:
    return ModelTurn(content="", tool_calls=[
        {"id": f"c{i}", "name": "read-invoice", "arguments": '{"number": "INV-2001"}'}
        for i in range(65)])


def _stopped(run: Run) -> Run:
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    return run


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def test_following_the_advice_to_retry_lets_a_good_answer_complete_the_run(monkeypatch):
    scripted(monkeypatch, _invalid(), _invalid(), _invalid(), DONE)
    tasks, entries = Task.objects.count(), LedgerEntry.objects.count()
    run = _stopped(advance(start_triage(), times=20))
    advice = recommend(run, _steps(run))
    assert (advice.action.name, advice.step) == ("retry_step", "triage")
    advice.action.perform(run.pk, actor=ACTOR,
                          given=ActionInput(reason="prompt fixed", step="triage"))
    run = advance(Run.objects.get(pk=run.pk), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert Step.objects.get(run=run, name="triage").result["answer"] == DONE.content
    # The invalid calls were never made.
    assert set(ToolCall.objects.filter(step__run=run).values_list("status", flat=True)) == \
        {"invalid"}
    assert Task.objects.count() == tasks and LedgerEntry.objects.count() == entries


def test_a_resume_after_turns_refused_for_too_many_calls_lets_the_model_finish(monkeypatch):
    scripted(monkeypatch, _flood(), _flood(), _flood(), DONE)
    run = _stopped(advance(start_triage(), times=20))
    assert "3 turns asked for more tool calls than one turn may" in run.status_message
    transitions.resume(run.pk, actor=ACTOR, reason="the model was upgraded")
    run = advance(Run.objects.get(pk=run.pk), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert not ToolCall.objects.filter(step__run=run).exists()


def test_a_model_that_keeps_failing_after_the_retry_is_stopped_by_a_fresh_budget(
        monkeypatch):
    scripted(monkeypatch, *[_invalid() for _ in range(6)], DONE)
    run = _stopped(advance(start_triage(), times=20))
    transitions.retry_step(run.pk, step_name="triage", actor=ACTOR, reason="try once more")
    run = _stopped(advance(Run.objects.get(pk=run.pk), times=20))
    # Three more schema errors (the budget is 2), not one: the budget began again.
    assert "3 tool calls had arguments that fail their schema (budget 2)" in \
        run.status_message
    assert ToolCall.objects.filter(step__run=run, status="invalid").count() == 6
