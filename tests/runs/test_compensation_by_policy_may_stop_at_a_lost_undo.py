"""A compensation started by policy (the workflow undoes itself when an effect fails for
good) may stop at its very first undo, when a release removed it
(compensation.hold_undo_missing): the run then waits for a person as compensation failed,
naming the effect that stands, whichever transition started the compensation. That is
recording a step's outcome, settling a step whose outcome was unknown (its lookups and
resends spent), or recording an agent's tool call: the one table of run transitions lets
each of them end there, so the worker records the hold instead of being refused (and
crashing, then taking the run again and again). With the undo back, compensating again
undoes the effect once, with its key."""

import pytest

from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.definition import NotFound, StepResult, Workflow, registry
from runs.machine import transitions
from runs.machine.errors import UnknownOutcome
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, RunStatus, StepStatus, ToolCall, ToolCallStatus
from tests.factories import SYSTEM, advance_once, make_due, new_run, step
from tests.workflows import FAST, OrderIn, scripted_call

pytestmark = pytest.mark.django_db


def undos(script, name: str) -> list[tuple]:
    return [call for call in script.calls if call[0] == f"{name}:compensate"]


@pytest.fixture
def lookup_saga(script):
    """Reserve (undone by policy), then a charge whose outcome is never known: the receiver
    honours keys and the lookup by key finds nothing, so it is sent again with its key
    until its budget is spent (effects.settle, then resend_or_stop)."""
    workflow = Workflow("test-saga-charge-never-known", version=1, input=OrderIn,
                        auto_compensate=True)

    @workflow.write("reserve", retry=FAST, honours_key=True)
    def reserve(ctx):
        return scripted_call(ctx, lambda: StepResult({"held": 1}, remote_ref="R-1"))

    @reserve.compensate
    def release(ctx):
        script.calls.append(("reserve:compensate", ctx.key, ctx.attempt))
        ref = script.compensations.setdefault(ctx.key, "released")
        return StepResult({"released": ctx.remote_ref}, remote_ref=ref)

    @workflow.write("charge", retry=FAST, honours_key=True)
    def charge(ctx):
        return scripted_call(ctx, lambda: StepResult({}, remote_ref="C-1"))

    @charge.reconcile
    def find_charge(ctx):
        return NotFound()

    yield workflow
    registry.unregister(workflow)


def lose_the_undo(monkeypatch, workflow: str, step_name: str):
    """A release removes the undo of `step_name` (declared when the run started, so the
    step's row has its compensation key); returns how to bring it back."""
    spec = registry.get(workflow, 1).step(step_name)
    original = spec.compensate_fn
    monkeypatch.setattr(spec, "compensate_fn", None)
    return lambda: monkeypatch.setattr(spec, "compensate_fn", original)


def assert_held_at_the_reservation(run):
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.DEFINITION_MISSING)
    assert run.status_message.startswith("reserve: ")
    assert run.lease_owner == ""
    # Nothing was sent to undo it: the reservation stands as it did.
    assert step(run, "reserve").status == StepStatus.SUCCEEDED
    started = AuditRecord.objects.get(run=run, action="compensation_started")
    assert started.reason.startswith("automatic, by policy:")
    held = AuditRecord.objects.get(run=run, action="definition_missing")
    assert held.step_name == "reserve"
    assert (held.before["status"], held.after["status"]) == (RunStatus.COMPENSATING,
                                                             RunStatus.COMPENSATION_FAILED)


def test_a_lookup_that_spends_the_resends_then_meets_a_lost_undo_holds_the_run(
        script, lookup_saga, monkeypatch):
    run = new_run(lookup_saga.name)
    restore = lose_the_undo(monkeypatch, lookup_saga.name, "reserve")
    script.plan["charge"] = [UnknownOutcome("connection reset")] * FAST.maximum_attempts

    run = advance_once(run)
    for _ in range(FAST.maximum_attempts):  # not found: sent again with its key, when due
        if run.status != RunStatus.WAITING:
            break
        make_due(run)
        run = advance_once(run)

    # The last lookup found nothing and the resends were spent: settling the charge
    # (settle_unknown) starts the compensation by policy, which stops at once.
    assert_held_at_the_reservation(run)
    charge = step(run, "charge")
    assert (charge.status, charge.attempt) == (StepStatus.FAILED, FAST.maximum_attempts)
    assert undos(script, "reserve") == []

    restore()
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo restored")
    assert advance_once(run).status == RunStatus.COMPENSATED
    assert [call[1] for call in undos(script, "reserve")] == [
        step(run, "reserve").compensation_key]


def test_a_tool_call_that_fails_for_good_then_meets_a_lost_undo_holds_the_run(
        script, monkeypatch):
    """The agent's first call, the charge, is declined for good: recording it (tool_call)
    starts the compensation by policy, whose first undo is the reservation's."""
    turns = [ModelTurn(content="", tool_calls=[{"id": "c0", "name": "charge",
                                                "arguments": '{"text": "10 EUR"}'}]),
             ModelTurn(content="done", tool_calls=[])]
    monkeypatch.setattr(agent_loop, "ask_model",
                        lambda client, spec, conversation, **kw: turns.pop(0))
    run, _ = transitions.start_run(workflow="test-agent-saga", business_key="lost-undo-1",
                                   input={"order": "o-1"}, actor=SYSTEM, wake=False)
    restore = lose_the_undo(monkeypatch, "test-agent-saga", "reserve")

    run = advance_once(run)
    assert_held_at_the_reservation(run)
    charge = ToolCall.objects.get(step__run=run, tool="charge")
    assert charge.status == ToolCallStatus.FAILED
    assert step(run, "assist").status == StepStatus.FAILED
    assert script.compensations == {}

    restore()
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo restored")
    assert advance_once(run).status == RunStatus.COMPENSATED
    assert step(run, "reserve").status == StepStatus.COMPENSATED
    assert len(script.compensations) == 1  # the reservation's, once
