"""A hostile or broken model may answer one turn with thousands of tool calls. A turn asking
for more than RUNS_AGENT_TURN_MAX_TOOL_CALLS is refused as a whole: none of its calls is
made, none has a row, the turn keeps none of them, and the model is told at its next turn,
as it is told of a call whose arguments fail their schema. Each such turn counts against
the agent's schema error budget, so a model that keeps asking stops the run for a person.
An agent may declare a lower bound of its own (AgentBudget(max_calls_per_turn)), never a
higher one. The demo's triage agent, its model scripted, against the sandbox over real
HTTP."""

import dataclasses
import json

import pytest

from audit.models import AuditRecord
from demo.agent_workflow import triage
from demo.sandbox.models import LedgerEntry, Task
from runs.agent_models import AgentTurn, ToolCall
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, RunStatus, Step
from tests.agent_runs import advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)

TASK = {"invoice": "INV-2001", "vendor": "Acme", "amount": "345.48", "currency": "EUR",
        "category": "office"}
LIMIT = "more than the 64 one answer may ask for (RUNS_AGENT_TURN_MAX_TOOL_CALLS)"


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def _flood(n: int = 5000) -> ModelTurn:
    """A turn asking for `n` approval tasks, each with arguments its tool accepts."""
    return ModelTurn(content="opening them all", tool_calls=[
        {"id": f"c{i}", "name": "open-approval-task",
         "arguments": json.dumps({**TASK, "vendor": f"Acme {i}"})} for i in range(n)])


def test_a_flood_of_calls_makes_none_and_the_model_is_told_then_goes_on(monkeypatch):
    seen = scripted(
        monkeypatch, _flood(),
        ModelTurn(content="", tool_calls=[{"id": "one", "name": "open-approval-task",
                                           "arguments": json.dumps(TASK)}]),
        ModelTurn(content="Opened the approval task.", tool_calls=[]))
    tasks, entries = Task.objects.count(), LedgerEntry.objects.count()
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    step = Step.objects.get(run=run, name="triage")
    first, second, answer = AgentTurn.objects.filter(step=step).order_by("index")
    # The refused turn keeps none of its calls, and says why.
    assert first.tool_calls == [] and "5,000 tool calls" in first.refused
    assert LIMIT in first.refused
    # No row and no effect for any of the 5,000: the one task is the next turn's call.
    assert not ToolCall.objects.filter(step=step, turn=first.index).exists()
    made = ToolCall.objects.get(step=step)
    assert made.turn == second.index and made.status == "succeeded"
    assert Task.objects.count() == tasks + 1 and LedgerEntry.objects.count() == entries
    assert Task.objects.latest("pk").idempotency_key == made.idempotency_key
    # The model was told at its next request, which carries none of the 5,000.
    told = seen[1]
    assert told[-1]["role"] == "user" and "none of its tool calls was made" in \
        told[-1]["content"] and LIMIT in told[-1]["content"]
    assert told[-2] == {"role": "assistant", "content": "opening them all"}
    assert len(json.dumps(told)) < 10_000
    record = AuditRecord.objects.get(run=run, action="agent_turn_stored",
                                     data__turn=first.index)
    assert record.data["tool_calls"] == [] and LIMIT in record.data["refused"]
    assert step.result["tool_calls"] == 1


def test_a_model_that_keeps_asking_for_too_many_is_stopped_by_its_schema_budget(
        monkeypatch):
    scripted(monkeypatch, *[_flood(65) for _ in range(6)])
    tasks, entries = Task.objects.count(), LedgerEntry.objects.count()
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    step = Step.objects.get(run=run, name="triage")
    assert step.error_class == ErrorClass.MODEL_FORMAT
    # The triage agent's schema error budget is 2: the third refused turn stops the run.
    assert "3 turns asked for more tool calls than one turn may (budget 2)" in \
        step.error_message
    assert "65 tool calls" in step.error_message
    turns = AgentTurn.objects.filter(step=step)
    assert turns.count() == 3 and all(t.refused and t.tool_calls == [] for t in turns)
    assert not ToolCall.objects.filter(step__run=run).exists()
    assert Task.objects.count() == tasks and LedgerEntry.objects.count() == entries


def test_a_turn_within_the_bound_is_taken_as_before(monkeypatch, settings):
    settings.RUNS_AGENT_TURN_MAX_TOOL_CALLS = 2
    scripted(monkeypatch,
             ModelTurn(content="", tool_calls=[
                 {"id": f"r{i}", "name": "read-invoice", "arguments": '{"number": "INV-2001"}'}
                 for i in range(2)]),
             ModelTurn(content="Read it twice.", tool_calls=[]))
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert [c.status for c in ToolCall.objects.filter(step__run=run)] == ["succeeded"] * 2
    assert not AgentTurn.objects.filter(step__run=run).exclude(refused="").exists()


def _reads(n: int) -> ModelTurn:
    return ModelTurn(content="", tool_calls=[
        {"id": f"r{i}", "name": "read-invoice", "arguments": '{"number": "INV-2001"}'}
        for i in range(n)])


def test_an_agent_that_declares_a_lower_bound_has_a_turn_over_it_refused_naming_its_own(
        monkeypatch):
    monkeypatch.setattr(triage, "budget",
                        dataclasses.replace(triage.budget, max_calls_per_turn=1))
    seen = scripted(monkeypatch, _reads(2), _reads(1),
                    ModelTurn(content="Read it once.", tool_calls=[]))
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    step = Step.objects.get(run=run, name="triage")
    first = AgentTurn.objects.get(step=step, index=0)
    assert first.tool_calls == [] and "it asked for 2 tool calls" in first.refused
    assert "more than the 1 one answer may ask for (the agent's " \
        "AgentBudget(max_calls_per_turn))" in first.refused
    # Only the next turn's one call was made; the model was told the agent's bound.
    assert [c.turn for c in ToolCall.objects.filter(step=step)] == [1]
    assert "Ask for at most 1 tool calls in one answer." in seen[1][-1]["content"]


def test_an_agents_bound_above_the_installations_does_not_raise_it(monkeypatch, settings):
    settings.RUNS_AGENT_TURN_MAX_TOOL_CALLS = 2
    monkeypatch.setattr(triage, "budget",
                        dataclasses.replace(triage.budget, max_calls_per_turn=50))
    scripted(monkeypatch, _reads(3), ModelTurn(content="Done.", tool_calls=[]))
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    first = AgentTurn.objects.get(step__run=run, index=0)
    assert "more than the 2 one answer may ask for (RUNS_AGENT_TURN_MAX_TOOL_CALLS)" in \
        first.refused
    assert not ToolCall.objects.filter(step__run=run).exists()
