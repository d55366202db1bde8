"""A cancel request reaches inside an agent step: it is read before every model turn and
every tool call, nothing new starts once it has committed, the call in flight settles, the
conversation so far is kept, and the audit trail says where the cancel took effect."""

import pytest
from django.conf import settings

from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, Task
from runs.agents import agent_loop
from runs.machine import transitions
from runs.machine.wakeup import send_wakeup
from runs.models import AgentTurn, Run, RunStatus, Step, ToolCall
from tests.agent_runs import advance, start_triage
from tests.processes import start_worker, stop, until_status, wait_for

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = Actor.system("olga")


def _cancel_record(run) -> AuditRecord:
    return AuditRecord.objects.get(run=run, action="cancelled")


def test_cancel_during_the_first_tool_call_with_a_real_worker(live_sandbox, empty_broker,
                                                              tmp_path):
    # The first call (read the invoice) is held for a few seconds by the sandbox; the
    # worker waits for it, so the cancel arrives while it is in flight.
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    faults.add("invoices.read", faults.SLOW)
    run = start_triage()
    worker = start_worker("agent", tmp_path)
    try:
        send_wakeup(run.pk)
        first = wait_for(lambda: ToolCall.objects.filter(
            step__run=run, tool="read-invoice", status="running").first(),
            timeout=60, what="the first tool call to be in flight")
        transitions.cancel(run.pk, actor=OPERATOR, reason="wrong vendor")
        run = until_status(run, RunStatus.TERMINATED)
    finally:
        stop(worker)
    calls = list(ToolCall.objects.filter(step__run=run))
    # The call in flight settled with its outcome; nothing started after it.
    assert [(c.pk, c.tool, c.status) for c in calls] == [(first.pk, "read-invoice",
                                                          "succeeded")]
    assert LedgerEntry.objects.count() == 0 and Task.objects.count() == 0
    assert AgentTurn.objects.filter(step__run=run).count() == 1  # the conversation is kept
    record = _cancel_record(run)
    assert record.data["where"] == "after tool call 0.0 (read-invoice) settled"
    assert record.data["step"] == "triage"
    requested = AuditRecord.objects.get(run=run, action="cancel_requested")
    assert requested.reason == "wrong vendor" and requested.seq < record.seq


def test_a_cancel_during_a_model_turn_stops_before_the_tool_call_it_asked_for(
        live_sandbox, monkeypatch):
    ask = agent_loop.ask_model
    turns = []

    def ask_then_cancel(client, spec, conversation):
        turn = ask(client, spec, conversation)
        turns.append(turn)
        if len(turns) == 2:
            run_id = Run.objects.get().pk
            transitions.cancel(run_id, actor=OPERATOR, reason="stop")
        return turn

    monkeypatch.setattr(agent_loop, "ask_model", ask_then_cancel)
    run = advance(start_triage())
    assert run.status == RunStatus.TERMINATED
    # The second turn is stored (the conversation is kept); the call it asked for never ran.
    assert AgentTurn.objects.filter(step__run=run).count() == 2
    asked = ToolCall.objects.get(step__run=run, turn=1)
    assert asked.status == "pending" and asked.attempt == 0
    assert _cancel_record(run).data["where"] == f"before tool call 1.0 ({asked.tool})"
    assert Task.objects.count() == 0 and LedgerEntry.objects.count() == 0
    assert Step.objects.get(run=run, name="triage").status == "failed"


def test_a_cancel_between_tool_call_and_model_turn_stops_before_the_model_is_asked(
        live_sandbox, monkeypatch):
    from runs.machine.transitions import agent_calls

    record = agent_calls.record_tool_outcome
    asked = []

    def record_then_cancel(lease, step, call, outcome):
        lease = record(lease, step, call, outcome)
        transitions.cancel(lease.run.pk, actor=OPERATOR, reason="stop")
        return lease

    monkeypatch.setattr(agent_calls, "record_tool_outcome", record_then_cancel)
    original = agent_loop.ask_model
    monkeypatch.setattr(agent_loop, "ask_model",
                        lambda *a: asked.append(1) or original(*a))
    run = advance(start_triage())
    assert run.status == RunStatus.TERMINATED
    assert len(asked) == 1  # the first turn only: no model turn after the cancel
    assert ToolCall.objects.get(step__run=run).status == "succeeded"
    assert _cancel_record(run).data["where"] == "before model turn 1"
