"""A tool call whose id repeats an earlier call's in its turn, or that came without one, is
given an id of its own: one that no other call of the turn has, whatever ids the model sent
(its own may look like the ones the runtime gives), and that fits its column however many
calls the turn holds. The turn is stored once, the call made under the id it was sent with
is made, and the conversation sent back pairs each result with a distinct call."""

import json

import pytest

from runs.agent_models import AgentTurn
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus, ToolCall
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db


def _call(ident, text):
    return {"id": ident, "name": "write-note", "arguments": json.dumps({"text": text})}


def _run(script, monkeypatch, calls):
    """Start test-agent with a model answering `calls` once, then a final answer; advance it
    and return (the run, the conversations the model was sent)."""
    script.reset()
    answers = [ModelTurn(content="", tool_calls=calls)]
    asked = []

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        return answers.pop(0) if answers else ModelTurn(content="done", tool_calls=[])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run, _ = transitions.start_run(workflow="test-agent", business_key="own-ids",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run, asked


def _assert_ids_distinct(run):
    rows = list(ToolCall.objects.filter(step__run=run, turn=0).order_by("index"))
    ids = [row.call_id for row in rows]
    assert len(set(ids)) == len(ids), ids
    assert all(len(i) <= 200 for i in ids)
    # The stored turn carries the same ids: the conversation is rebuilt from it.
    (turn,) = AgentTurn.objects.filter(step__run=run, index=0)
    assert [c["id"] for c in turn.tool_calls] == ids
    return rows


def test_an_id_given_to_a_repeat_is_none_the_model_sent_later_in_the_turn(script,
                                                                          monkeypatch):
    run, asked = _run(script, monkeypatch, [_call("x", "a"), _call("x", "b"),
                                            _call("x~repeat-1", "c")])
    assert run.status == RunStatus.COMPLETED, run.status_message
    first, repeat, third = _assert_ids_distinct(run)
    assert (first.call_id, first.status) == ("x", "succeeded")
    assert repeat.status == "invalid" and "repeats tool call 0's" in repeat.error_message
    # The third call's id was its own as the model sent it: it is kept, and the call made.
    assert (third.call_id, third.status) == ("x~repeat-1", "succeeded")
    assert [name for name, *_ in script.calls if name == "write-note"] == ["write-note"] * 2
    told = [m["tool_call_id"] for m in asked[-1] if m["role"] == "tool"]
    assert sorted(told) == sorted(["x", repeat.call_id, "x~repeat-1"])


def test_an_id_given_to_a_call_sent_without_one_is_none_the_model_sent(script, monkeypatch):
    run, asked = _run(script, monkeypatch, [_call("call_0_1", "a"), _call(None, "b"),
                                            _call("call_0_1~1", "c")])
    assert run.status == RunStatus.COMPLETED, run.status_message
    rows = _assert_ids_distinct(run)
    assert [r.status for r in rows] == ["succeeded"] * 3
    assert rows[0].call_id == "call_0_1" and rows[2].call_id == "call_0_1~1"
    told = [m["tool_call_id"] for m in asked[-1] if m["role"] == "tool"]
    assert sorted(told) == sorted(r.call_id for r in rows)


def test_a_repeat_of_a_long_id_far_into_a_crowded_turn_is_stored_once(script, monkeypatch,
                                                                       settings):
    # A turn this crowded is refused whole by default; where the bound is raised, its
    # calls' ids still fit and stay distinct.
    settings.RUNS_AGENT_TURN_MAX_TOOL_CALLS = 20_000
    long = "y" * 200
    calls = [_call(long, "a")] + [_call(f"c{i}", "q") for i in range(1, 10_000)] \
        + [_call(long, "b")]
    run, asked = _run(script, monkeypatch, calls)
    # Stored once (the model asked once), and past the tool call budget: a person looks.
    assert len(asked) == 1 == AgentTurn.objects.filter(step__run=run).count()
    assert run.status == RunStatus.ATTENTION and run.attention_reason == "budget_exhausted"
    repeat = ToolCall.objects.get(step__run=run, turn=0, index=10_000)
    assert repeat.status == "invalid" and repeat.call_id.endswith("~repeat-10000")
    assert len(repeat.call_id) == 200
    assert not script.calls  # nothing made past the budget
