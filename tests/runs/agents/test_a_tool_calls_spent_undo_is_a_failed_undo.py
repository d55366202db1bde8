"""An agent step's compensation undoes its tool calls one by one. When the undo of one call
keeps failing with a transient error until its resends are spent, the compensation fails
(effects.undo_outcome): the run halts in compensation_failed, the agent step says so, and
so does the call itself, with the error it failed with. Nothing carries its undo on, so the
run page and the API must not read it as being undone (compensating). Compensating again
sends the call's undo again with its key, and it is undone once."""

import pytest

from api.tokens import token_create
from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.machine import transitions
from runs.machine.errors import PermanentError, TransientError
from runs.models import AttentionReason, ErrorClass, RunStatus, StepStatus, ToolCall, ToolCallStatus
from tests.factories import SYSTEM, advance_once, make_due, step
from tests.workflows import FAST, note_then_charge, start_saga

pytestmark = pytest.mark.django_db


def undos(script) -> list[tuple]:
    return [call for call in script.calls if call[0] == "write-note:compensate"]


@pytest.fixture
def busy_note(monkeypatch):
    """The note's undo answers "busy" every time; the agent step's undo has FAST's budget
    (three attempts). Returns the tool, to give it its real undo back."""
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    assist = registry.get("test-agent-saga", 1).step("assist")
    monkeypatch.setattr(assist, "retry", FAST)
    tool = assist.tools["write-note"]
    real = tool.compensate_fn

    def busy(ctx, args):
        undos_sent.append(ctx.key)
        raise TransientError("busy")

    undos_sent: list[str] = []
    monkeypatch.setattr(tool, "compensate_fn", busy)
    return tool, real, undos_sent


def spent(key: str):
    """A run of test-agent-saga whose note's undo was sent until its budget was spent."""
    run = start_saga(key)
    run = advance_once(run)
    for _ in range(5):
        if run.status != RunStatus.COMPENSATING:
            break
        make_due(run)
        run = advance_once(run)
    return run


def test_a_tool_calls_undo_whose_resends_are_spent_leaves_the_call_a_failed_undo(
        script, busy_note, monkeypatch, client):
    tool, real, undos_sent = busy_note
    run = spent("spent-1")
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.COMPENSATION_FAILED)
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert len(undos_sent) == FAST.maximum_attempts
    assert set(undos_sent) == {note.compensation_key}  # every one with the call's key
    assert (note.status, note.next_attempt_at) == (ToolCallStatus.COMPENSATION_FAILED, None)
    assert (note.error_class, note.error_message) == (ErrorClass.TRANSIENT,
                                                      "TransientError: busy")
    assert step(run, "assist").status == StepStatus.COMPENSATION_FAILED
    assert step(run, "reserve").status == StepStatus.SUCCEEDED  # nothing undone behind it
    failed = AuditRecord.objects.get(run=run, action="compensation_failed")
    assert failed.step_name == "assist"
    assert failed.data["tool_calls"] == {note.ref: ToolCallStatus.COMPENSATION_FAILED}

    # The API says what the row says: a failed undo, with its error, not one under way.
    _, plaintext = token_create(name="reader", workflows=["test-agent-saga"])
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    (shown,) = [c for c in response.json()["agent_steps"][0]["tool_calls"]
                if c["tool"] == "write-note"]
    assert shown["state"] == ToolCallStatus.COMPENSATION_FAILED
    assert shown["last_error"] == {"error_class": "transient",
                                   "message": "TransientError: busy"}

    # Compensated again with the undo working: sent again with its key, undone once.
    monkeypatch.setattr(tool, "compensate_fn", real)
    transitions.compensate(run.pk, actor=SYSTEM, reason="the notes service is back")
    run = advance_once(run)
    assert run.status == RunStatus.COMPENSATED, run.status_message
    note.refresh_from_db()
    assert (note.status, note.error_class, note.error_message) == (
        ToolCallStatus.COMPENSATED, "", "")  # the failed tries no longer say what stands
    assert [call[1] for call in undos(script)] == [note.compensation_key]
    assert len(script.compensations) == 2  # the note's and the reservation's, once each


def test_a_tool_calls_undo_refused_for_good_leaves_the_call_a_failed_undo_at_once(
        script, monkeypatch):
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]

    def refused(ctx, args):
        raise PermanentError("note is locked")

    monkeypatch.setattr(tool, "compensate_fn", refused)
    run = start_saga("refused-1")
    run = advance_once(run)
    assert run.status == RunStatus.COMPENSATION_FAILED, run.status_message
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert (note.status, note.error_class, note.error_message) == (
        ToolCallStatus.COMPENSATION_FAILED, ErrorClass.PERMANENT, "PermanentError: note is locked")
    assert step(run, "assist").status == StepStatus.COMPENSATION_FAILED
