"""An agent's model turn, or a tool call's intent, that the database rolls back for its clash
with another session (a serialization failure, a deadlock, a row held past lock_timeout) is
written again at once from the rows as the database holds them (runs.machine.transitions.
clashes), as a tool call's outcome is. Dropped, the model's stored answer was lost with the
worker's transaction: the run waited for its lease to run out and the model was asked again
after the take-back (a paid call, whose answer may differ); a dropped intent left the run
waiting for its lease with nothing sent.

The invoice-triage agent against the sandbox over real HTTP, advanced in this process; the
database refuses one write once (the clash_once fixture: a trigger raising SQLSTATE 40001).
The sandbox counts the model's requests (ModelCall) and this test every request it serves."""

import logging

import pytest
from django.core.signals import request_started

from audit.actions import AuditAction
from audit.chain import verify_chain
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.agents import agent_loop
from runs.models import AgentTurn, RunStatus, ToolCall
from tests.agent_runs import SMALL, advance, start_triage
from tests.runs.clash_sessions import actions, undone_once_without_a_take_back
from tests.workflows import note_then_charge, start_saga

pytestmark = pytest.mark.django_db(transaction=True)

TASK = "open-approval-task"


@pytest.fixture
def sandbox(live_sandbox, settings):
    # The model's requests are counted: none may time out on a busy machine and be asked
    # again for that reason.
    settings.EXTERNAL_TIMEOUT_SECONDS = 10
    return live_sandbox


@pytest.fixture
def received():
    """Each request the sandbox serves while the test runs: (method, path, Idempotency-Key)."""
    seen = []

    def note(sender, environ, **kwargs):
        seen.append((environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", ""),
                     environ.get("HTTP_IDEMPOTENCY_KEY", "")))

    request_started.connect(note, weak=False)
    yield seen
    request_started.disconnect(note)


def _went_on_by_its_worker(run) -> None:
    """The run completed by the worker that held it: nothing was taken back, looked up or
    sent twice, one ledger entry posted; its chain verifies."""
    assert run.status == RunStatus.COMPLETED
    calls = ToolCall.objects.filter(step__run=run)
    assert calls.exists() and {c.attempt for c in calls} == {1}
    assert {c.status for c in calls} == {"succeeded"}
    assert LedgerEntry.objects.count() == 1
    done = actions(run)
    for never in (AuditAction.LEASE_EXPIRED, AuditAction.STEP_LEASE_EXPIRED,
                  AuditAction.OUTCOME_UNKNOWN, AuditAction.RECONCILED):
        assert never not in done
    assert done.count(AuditAction.TOOL_CALL_SUCCEEDED) == calls.count()
    assert verify_chain(AuditRecord.objects.filter(run_id=run.pk).order_by("seq")) is None


def test_a_model_turn_rolled_back_for_a_clash_is_stored_once_and_the_model_asked_once(
        sandbox, clash_once, caplog):
    run = start_triage(SMALL, key="tenant-42:turn-clash")
    clash_once("runs_agentturn", "INSERT")  # the first turn's, once
    with caplog.at_level(logging.WARNING, logger="runs.machine.transitions.clashes"):
        run = advance(run)
    assert clash_once.writes() >= 2  # refused once, then written

    _went_on_by_its_worker(run)
    turns = list(AgentTurn.objects.filter(step__run=run).order_by("index"))
    assert [t.index for t in turns] == list(range(len(turns))) and len(turns) >= 2
    # One request to the model for each stored turn: the turn the database refused was
    # stored from the answer held in memory, never asked for again.
    assert ModelCall.objects.count() == len(turns)
    assert len({t.model_ref for t in turns}) == len(turns)
    assert actions(run).count(AuditAction.AGENT_TURN_STORED) == len(turns)
    # Each call the first turn asked for was made from the one stored row.
    first = [c.get("id") for c in turns[0].tool_calls]
    assert first and sorted(ToolCall.objects.filter(step__run=run, turn=0)
                            .values_list("call_id", flat=True)) == sorted(first)
    said = [r.getMessage() for r in caplog.records]
    assert any("the model's turn of step" in m and "could not serialize" in m for m in said)


def test_a_tool_calls_intent_rolled_back_for_a_clash_is_written_again_and_the_tool_called_once(
        sandbox, clash_once, received):
    # The approval task's intent (its row marked running) is the write refused.
    clash_once("runs_toolcall", "UPDATE",
               f"NEW.tool = '{TASK}' AND NEW.status = 'running' AND OLD.status <> 'running'")
    run = advance(start_triage(SMALL, key="tenant-42:intent-clash"))
    assert clash_once.writes() == 2  # refused once, then written once

    _went_on_by_its_worker(run)
    task = ToolCall.objects.get(step__run=run, tool=TASK)
    assert (task.status, task.attempt) == ("succeeded", 1)
    # The tracker was asked to create the task once, under the call's key, and never
    # looked it up: the intent that committed was the only one.
    posts = [key for method, path, key in received
             if method == "POST" and path.endswith("/tracker/tasks")]
    assert posts == [task.idempotency_key]
    assert not [path for method, path, _ in received
                if method == "GET" and path.endswith("/tracker/tasks")]
    assert Task.objects.filter(idempotency_key=task.idempotency_key).count() == 1
    assert task.remote_ref == Task.objects.get().ref


def test_a_tool_calls_undo_intent_rolled_back_for_a_clash_is_written_again_and_sent_once(
        clash_once, script, monkeypatch):
    # The agent writes a note, then a charge fails for good: the run is undone by policy,
    # the note's undo first. Its intent's write (the row marked compensating) is refused.
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    clash_once("runs_toolcall", "UPDATE",
               "NEW.status = 'compensating' AND OLD.status <> 'compensating'")
    run = advance(start_saga("undo-intent-clash"))
    assert clash_once.writes() == 2
    undone_once_without_a_take_back(run, script)
