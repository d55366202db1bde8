"""An agent's tool calls are made without reading every call of the step before each one:
the loop (runs.agents.agent_loop) read all the step's calls (tool_call_rules.calls_of)
before every call and scanned them for the budget and for a call the code can no longer
work, so an agent making 2,000 calls read some 2 million call rows. Now each pass reads the
calls of the turn being worked (at most a turn's bound of them); every call of the step is
read once per model turn, to build the conversation the model is sent. Measured by the call
rows read (model instances made from the database), not by time."""

import pytest
from pydantic import BaseModel

from runs.agents import agent_loop
from runs.definitions.declarations import AgentBudget
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus, ToolCall
from tests.agent_runs import ACTOR
from tests.workflows import NoteArgs, write_note

pytestmark = pytest.mark.django_db

PER_TURN = 20


class LongIn(BaseModel):
    order: str


def _agent(name: str) -> Workflow:
    workflow = Workflow(name, version=1, input=LongIn)
    agent = workflow.agent("assist", system_prompt="Take notes.", budget=AgentBudget(
        max_turns=50, max_tool_calls=1_000, max_tokens=10_000_000))
    agent.tool("write-note", kind="write", honours_key=True, args=NoteArgs)(write_note.fn)
    return workflow


LONG_AGENT = _agent("test-agent-many-calls")


def _call_rows_read(monkeypatch, turns: int, key: str) -> int:
    """The call rows read while the agent makes `turns` turns of PER_TURN notes each."""
    answers = [ModelTurn(content="", tool_calls=[
        {"id": f"c{t}-{i}", "name": "write-note", "arguments": f'{{"text": "note {t}.{i}"}}'}
        for i in range(PER_TURN)]) for t in range(turns)]

    def ask_model(client, spec, conversation, **kw):
        return answers.pop(0) if answers else ModelTurn(content="done", tool_calls=[])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    read = 0
    from_db = ToolCall.from_db.__func__

    def counted(cls, db, field_names, values):
        nonlocal read
        read += 1
        return from_db(cls, db, field_names, values)

    monkeypatch.setattr(ToolCall, "from_db", classmethod(counted))
    run, _ = transitions.start_run(workflow=LONG_AGENT.name, business_key=key,
                                   input={"order": key}, actor=ACTOR, wake=False)
    for _ in range(5):
        executor.advance_run(run.pk, worker="w1")
        run.refresh_from_db()
        if run.status != RunStatus.QUEUED:
            break
    monkeypatch.undo()
    assert run.status == RunStatus.COMPLETED, (run.status, run.status_message)
    assert ToolCall.objects.filter(step__run=run, status="succeeded").count() == \
        turns * PER_TURN
    return read


def test_ten_times_the_calls_read_about_ten_times_the_rows(script, monkeypatch):
    short = _call_rows_read(monkeypatch, 2, "short")
    long = _call_rows_read(monkeypatch, 20, "long")
    # Each call's pass reads the calls of its turn, and each model turn every call once
    # (the conversation): 40 and 400 calls, 1,040 rows against 13,820. It was 65 times
    # (1,380 against 89,400) while every call of the step was read before each call.
    assert long < 16 * short, (short, long)
