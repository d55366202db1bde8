"""An agent's tool call whose outcome the database rolls back for its clash with another
session (a serialization failure under a role's default_transaction_isolation = serializable,
a deadlock) is written again at once, from the rows as the database holds them, as a step's
outcome is: a tool call is an effect of the same one machine, and dropping its outcome left
the run to wait for its lease to run out, then settled the call by key. A real worker on
serializable sessions; a real session updates the run's row while the tool call is under way
and commits while the worker's outcome waits for that row, so the database refuses the
outcome's write (SQLSTATE 40001). The call reaches the receiver once, the outcome is the
worker's, and nothing is taken back or looked up."""

import pytest
from django.utils import timezone

from audit.actions import AuditAction
from audit.chain import Actor, verify_chain
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry
from runs.agents import agent_loop
from runs.bench_receiver import SlowReceiver
from runs.definitions.definition import Found
from runs.machine import transitions
from runs.machine.errors import Classified
from runs.machine.transitions import agent_calls, agent_compensation, start_run
from runs.models import ErrorClass, Run, RunStatus, Step, ToolCall
from tests.agent_runs import SMALL, advance
from tests.factories import new_run
from tests.processes import child_env, start_worker, stop, wait_for
from tests.runs.clash_sessions import (
    SERIALIZABLE,
    actions,
    other_session,
    undone_once_without_a_take_back,
    waiting_for_a_row,
)
from tests.workflows import note_then_charge, start_saga

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "open-approval-task"


def test_a_tool_calls_outcome_rolled_back_for_a_serialization_failure_is_written_again(
        live_sandbox, empty_broker, settings, tmp_path):
    # The sandbox's model and tools answer at once; only the approval task's receiver holds
    # the call, long enough for the other session to change the run's row under it.
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    url = child_env()["DATABASE_URL"] + SERIALIZABLE
    with SlowReceiver(delay=2) as receiver:
        # A lease long enough that only the worker's own outcome can complete the run while
        # the test waits: a take-back would come after it.
        worker = start_worker("clash", tmp_path, DATABASE_URL=url, VAR_DIR=tmp_path,
                              RUNS_LEASE_SECONDS=120)
        holder = other_session()
        try:
            run = start_run(workflow="test-triage-task-to-receiver", business_key="clash",
                            input={"tenant": "tenant-42", "invoice_number": SMALL,
                                   "requester_email": "requester@example.com",
                                   "n": 1, "url": receiver.url},
                            actor=Actor.system("clash-test"))[0]
            wait_for(lambda: receiver.held, timeout=60, interval=0.05,
                     what="the approval task's call to reach the receiver")
            # The row changes under the worker's call: its outcome's transaction waits for
            # it, then finds it changed since its snapshot and is refused.
            holder.execute("UPDATE runs_run SET cancel_requested = cancel_requested "
                           "WHERE id = %s", [run.pk])
            wait_for(lambda: waiting_for_a_row(holder), timeout=60, interval=0.05,
                     what="the worker's outcome to wait for the run's row")
            holder.commit()
            wait_for(lambda: Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED,
                     timeout=60, interval=0.2, what="the run to complete by its worker")
        finally:
            holder.close()
            stop(worker)
        assert list(receiver.posts.values()) == [1]  # one call, one effect

    task = ToolCall.objects.get(step__run=run, tool=TASK)
    assert (task.status, task.attempt) == ("succeeded", 1)
    assert task.remote_ref == receiver.effects[task.idempotency_key]
    calls = ToolCall.objects.filter(step__run=run)
    assert sorted(calls.values_list("tool", "attempt")) == [
        ("lookup-vendor", 1), (TASK, 1), ("post-ledger", 1), ("read-invoice", 1)]
    assert LedgerEntry.objects.count() == 1  # the agent went on from the outcome, once
    actions = list(AuditRecord.objects.filter(run_id=run.pk).values_list("action", flat=True))
    assert AuditAction.LEASE_EXPIRED not in actions
    assert AuditAction.STEP_LEASE_EXPIRED not in actions
    assert AuditAction.OUTCOME_UNKNOWN not in actions
    assert AuditAction.RECONCILED not in actions
    assert actions.count(AuditAction.TOOL_CALL_SUCCEEDED) == 4
    said = (tmp_path / "clash.log").read_text()
    assert "could not serialize access" in said  # the database did refuse it once
    assert f"the outcome of tool call {task.ref} ({TASK})" in said
    assert "Traceback" not in said and "raised unexpected" not in said


# The same, in this process: the database refuses the first write of a tool call's row once,
# as a clash (a trigger raising SQLSTATE 40001), for the call's outcome, a lookup's verdict
# on it and its undo's outcome; what is written again is what the rows as the database
# holds them call for (the clash_once fixture, tests/runs/conftest.py: by default, the first
# update of a tool call's row).


def _call_in_flight():
    """A tool call of the test-effect-call agent, its intent recorded under a lease."""
    run = new_run("test-effect-call", wake=False)
    lease = transitions.claim_run(run.pk, worker="w1")
    assert lease.work.name == "act"
    call = ToolCall.objects.create(
        step=Step.objects.get(run=run, name="act"), turn=1, index=0, call_id="c1",
        tool="note", kind="write", arguments={"text": "hi"},
        args_hash=agent_calls.args_hash({"text": "hi"}), idempotency_key="k" * 64,
        updated_at=timezone.now())
    call = agent_calls.begin_tool_call(lease, lease.by_name("act"), call)
    assert call.status == "running"
    return run, lease, call


def test_a_tool_calls_outcome_refused_once_is_written_from_the_rows_the_database_holds(
        clash_once):
    run, lease, call = _call_in_flight()
    clash_once()
    lease = agent_calls.record_tool_outcome(
        lease, lease.by_name("act"), call,
        transitions.Outcome(succeeded=True, value={"id": "E-1"}, remote_ref="E-1"))
    assert not lease.finished and lease.work.name == "act"
    row = ToolCall.objects.get(pk=call.pk)
    assert (row.status, row.attempt, row.remote_ref) == ("succeeded", 1, "E-1")
    assert Step.objects.get(run=run, name="act").status == "running"
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    assert actions(run) == ["started", "claimed", "tool_call_succeeded"]
    assert verify_chain(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")) is None


def test_a_lookups_verdict_on_a_tool_call_refused_once_is_written_again(clash_once):
    run, lease, call = _call_in_flight()
    lease = agent_calls.record_tool_outcome(
        lease, lease.by_name("act"), call,
        transitions.Outcome(False, error=Classified(ErrorClass.UNKNOWN, "timed out")))
    assert ToolCall.objects.get(pk=call.pk).status == "unknown"
    clash_once()
    lease = agent_calls.settle_tool_call(lease, lease.by_name("act"), call,
                                         Found("E-7", {"ok": True}))
    row = ToolCall.objects.get(pk=call.pk)
    assert (row.status, row.attempt, row.remote_ref) == ("succeeded", 1, "E-7")
    assert Run.objects.get(pk=run.pk).status == RunStatus.RUNNING
    assert actions(run) == ["started", "claimed", "outcome_unknown", "reconciled"]
    assert verify_chain(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")) is None


def test_a_tool_calls_undo_refused_once_is_written_again_and_not_sent_again(
        clash_once, script, monkeypatch):
    # The agent writes a note, then a charge fails for good: the run is undone by policy,
    # the note's undo first. Its outcome's write is the one refused.
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    record, armed = agent_compensation.record_tool_compensation, []

    def refused_once_then_recorded(*args, **kw):
        if not armed:
            armed.append(clash_once())
        return record(*args, **kw)

    monkeypatch.setattr(agent_compensation, "record_tool_compensation",
                        refused_once_then_recorded)
    run = advance(start_saga("undo-clash"))
    assert armed
    undone_once_without_a_take_back(run, script)
