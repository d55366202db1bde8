"""An agent's effects are its tool calls', whatever the agent step's own end: a compensation
undoes every call whose effect stands and that declared an undo, when the agent failed, was
cancelled inside, or was ended by a person during a model turn. Ending a run during a model
turn leaves the agent failed (a model turn is no effect), not unknown with nothing to
settle. A person's undo of one call cut short by a crash keeps the run from going on until
that undo is sent again, and the model is told which calls a person undid."""

import json

import pytest
from pydantic import BaseModel

from audit.chain import Actor
from audit.models import AuditRecord
from demo.agent_workflow import triage
from demo.sandbox.models import LedgerEntry, Task
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus, ToolCall
from runs.operator.actions import ACTIONS, ActionInput
from tests.agent_runs import ACTOR, SMALL, advance, start_triage
from tests.workflows import note_then_charge

pytestmark = pytest.mark.django_db(transaction=True)
SECOND = Actor.system("second")


def reversals() -> int:
    return LedgerEntry.objects.filter(reverses__isnull=False).count()


def undo_everything(run) -> Run:
    """Compensate (a second person agreeing), confirm the ledger's undo when it pauses."""
    transitions.compensate(run.pk, actor=ACTOR, reason="withdrawn", approved_by=SECOND)
    run = advance(run)
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED, run.status_message
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    ACTIONS["confirm_compensation"].perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="reversal checked", step="triage", call=post.ref))
    return advance(run)


def test_an_agent_cancelled_inside_after_it_posted_is_undone_by_compensate(
        live_sandbox, monkeypatch):
    tool = triage.tools["post-ledger"]
    post = tool.fn

    def cancel_then_post(ctx, args):
        # With a second person's approval: the posting in flight may stand (four eyes).
        transitions.cancel(ctx.run_id, actor=ACTOR, reason="wrong vendor", approved_by=SECOND)
        return post(ctx, args)

    monkeypatch.setattr(tool, "fn", cancel_then_post)
    run = advance(start_triage(SMALL, key="tenant-42:cancelled-then-undone"))
    monkeypatch.undo()
    assert run.status == RunStatus.TERMINATED and LedgerEntry.objects.count() == 1
    assert Step.objects.get(run=run, name="triage").status == StepStatus.FAILED
    transitions.reopen(run.pk, actor=ACTOR, reason="the posting must go")

    run = undo_everything(run)
    assert run.status == RunStatus.COMPENSATED
    assert reversals() == 1 and Task.objects.get().status == Task.CANCELLED
    assert LedgerEntry.objects.filter(reverses__isnull=True).count() == 1  # not posted again


def test_an_agent_ended_during_a_model_turn_fails_and_its_effects_are_undone(
        live_sandbox, monkeypatch):
    ask = agent_loop.ask_model
    key = "tenant-42:ended-in-a-turn"

    def ask_then_terminate(client, spec, conversation, **kw):
        if LedgerEntry.objects.exists() and not Run.objects.filter(
                business_key=key, status=RunStatus.TERMINATED).exists():
            transitions.terminate(Run.objects.get(business_key=key).pk, actor=ACTOR,
                                  reason="stop", approved_by=SECOND)
        return ask(client, spec, conversation, **kw)

    monkeypatch.setattr(agent_loop, "ask_model", ask_then_terminate)
    run = advance(start_triage(SMALL, key=key))
    monkeypatch.undo()
    assert run.status == RunStatus.TERMINATED
    triage_step = Step.objects.get(run=run, name="triage")
    # The model turn in flight was no effect: nothing to settle, the agent failed.
    assert triage_step.status == StepStatus.FAILED
    transitions.reopen(run.pk, actor=ACTOR, reason="the posting must go")
    run.refresh_from_db()
    assert ACTIONS["compensate"].refusal(run, list(run.steps.all())) is None

    run = undo_everything(run)
    assert run.status == RunStatus.COMPENSATED and reversals() == 1


def scripted(*turns):
    queue = list(turns)
    return lambda client, spec, conversation, **kw: queue.pop(0)


@pytest.mark.django_db
def test_an_agents_permanent_failure_undoes_its_own_calls_too_by_policy(script, monkeypatch):
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    run, _ = transitions.start_run(workflow="test-agent-saga", business_key="saga-1",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert note.status == "compensated"
    assert [c[0] for c in script.calls if c[0].endswith(":compensate")] == [
        "write-note:compensate", "reserve:compensate"]  # newest first
    assert len(script.compensations) == 2
    assert [c[0] for c in script.calls].count("charge") == 1  # a permanent error: once
    started = AuditRecord.objects.get(run=run, action="compensation_started")
    assert started.data["order"] == ["assist", "reserve"]  # the agent, stopped, is in it


class NarrowerNote(BaseModel):
    text: int  # a release narrowed the schema: stored notes no longer pass it


@pytest.mark.django_db
def test_an_undo_whose_arguments_a_release_narrowed_is_held_never_quoting_them(
        script, monkeypatch):
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    run, _ = transitions.start_run(workflow="test-agent-saga", business_key="saga-2",
                                   input={"order": "o-3"}, actor=ACTOR, wake=False)
    tools = registry.get("test-agent-saga", 1).step("assist").tools
    charge = tools["charge"].fn

    def released_then_charge(ctx, args):
        # The release lands after the note was written, before the charge fails.
        monkeypatch.setattr(tools["write-note"], "args", NarrowerNote)
        return charge(ctx, args)

    monkeypatch.setattr(tools["charge"], "fn", released_then_charge)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATION_FAILED
    run.refresh_from_db()
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert run.attention_reason == AttentionReason.DEFINITION_MISSING
    assert run.status_message == (
        f"assist tool call {note.ref}: test-agent-saga v1 in this worker: the call's stored "
        "arguments no longer match NarrowerNote: text: Input should be a valid integer, "
        "unable to parse string as an integer")
    assert note.status == "succeeded"
    assert [c[0] for c in script.calls if c[0].endswith(":compensate")] == []
    said = [run.status_message, *AuditRecord.objects.filter(run=run).values_list(
        "data", flat=True)]
    assert not any("hold the room" in str(text) for text in said)


def note_then_an_invented_tool(monkeypatch, key: str):
    """A test-agent run that wrote a note, then asked for a tool it does not have: it
    waits for a person, its note standing."""
    run, _ = transitions.start_run(workflow="test-agent", business_key=key,
                                   input={"order": key}, actor=ACTOR, wake=False)
    monkeypatch.setattr(agent_loop, "ask_model", scripted(
        ModelTurn(content="", tool_calls=[{"id": "c0", "name": "write-note",
                                           "arguments": '{"text": "a"}'}]),
        ModelTurn(content="", tool_calls=[{"id": "c1", "name": "missing-tool",
                                           "arguments": "{}"}])))
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION, run.status_message
    return run, ToolCall.objects.get(step__run=run, tool="write-note")


@pytest.mark.django_db
def test_a_run_does_not_go_on_while_a_persons_undo_of_one_call_is_in_doubt(
        script, monkeypatch):
    run, note = note_then_an_invented_tool(monkeypatch, "in-doubt")

    # As a process that died after recording the undo's intent leaves it: in doubt.
    ToolCall.objects.filter(pk=note.pk).update(status="compensating", compensation_attempt=1)
    run.refresh_from_db()
    for forward in ("resume", "retry_tool_call", "reconcile_tool_call"):
        refused = ACTIONS[forward].refusal(run, list(run.steps.all()))
        assert refused, forward
    refused = ACTIONS["resume"].refusal(run, list(run.steps.all()))
    assert f"the undo of assist: tool call {note.ref} (write-note) was sent" in refused

    ACTIONS["compensate_tool_call"].perform(run.pk, actor=ACTOR, given=ActionInput(
        reason="send the undo again", step="assist", call=note.ref))
    note.refresh_from_db()
    assert note.status == "compensated" and len(script.compensations) == 1

    run.refresh_from_db()
    assert ACTIONS["resume"].refusal(run, list(run.steps.all())) is None
    told = json.loads(agent_loop.tool_message(note))
    assert told["undone"] == "a person undid this call's effect; it no longer stands"


@pytest.mark.django_db
def test_a_persons_undo_of_a_call_made_without_one_is_not_offered(script, monkeypatch):
    run, note = note_then_an_invented_tool(monkeypatch, "no-undo-then")
    assert ACTIONS["compensate_tool_call"].refusal(run, list(run.steps.all())) is None
    # As a call made before a release gave its tool an undo: it got no compensation key.
    ToolCall.objects.filter(pk=note.pk).update(compensation_key="")
    assert ACTIONS["compensate_tool_call"].refusal(run, list(run.steps.all()))
    with pytest.raises(TransitionNotAllowed, match="declared no undo when it was made"):
        ACTIONS["compensate_tool_call"].perform(run.pk, actor=ACTOR, given=ActionInput(
            reason="not wanted", step="assist", call=note.ref))
    assert script.compensations == {}
