"""A person ends a run while its compensation undoes an agent step's tool calls, at a moment
when no call's undo is being sent: the step holds the lease for its calls' undos, but the
next call's undo is not sent yet (the one before it was undone, or failed and waits to be
sent again). Nothing can land later, and nothing will answer: only an undo sent and not
answered is in doubt (in_flight.undo_unanswered). So the calls say what stands, and the
step with them: a call undone stays undone, one whose undo was never sent stands, one whose
undo failed keeps its last try's error (a failed undo, still standing, never "may have been
undone" on the four-eyes list); the step's undo failed, ended by a person before every
call of it was undone. Compensated again, each call still standing is undone once."""

import pytest
from django.contrib.auth.models import User

from audit.chain import Actor
from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransientError
from runs.machine.transitions import agent_compensation
from runs.models import (
    AttentionReason,
    ErrorClass,
    RunStatus,
    StepStatus,
    ToolCall,
    ToolCallStatus,
)
from tests.factories import SYSTEM, advance_once, make_due, step
from tests.workflows import note_then_charge, notes_then_charge, start_saga

pytestmark = pytest.mark.django_db
SECOND = Actor.system("second")
IN_FLIGHT_AT_END = "in flight when the run was terminated"
ENDED_BEFORE_UNDONE = "ended by a person before every tool call of it was undone"


def state(row) -> tuple:
    row.refresh_from_db()
    return row.status, row.error_class, row.error_message


def ended_before_the_next_undo_is_sent(monkeypatch, run, *, after: int,
                                       **approval) -> dict:
    """The person ends the run (with `approval`) just before the worker records the intent
    of a call's undo, once `after` intents were recorded; the worker then finds the run
    ended. Returns what was seen right after the end: the run, and the four-eyes list."""
    begin, seen, begun = agent_compensation.begin_tool_compensation, {}, []

    def begin_after_the_end(lease, step_row, call, **kw):
        if len(begun) == after and not seen:
            seen["run"] = transitions.terminate(run.pk, actor=SYSTEM, reason="guest left",
                                                **approval)
            seen["four_eyes"] = [str(e) for e in transitions.high_impact_effects(
                list(run.steps.order_by("position")))]
        begun.append(call.ref)
        return begin(lease, step_row, call, **kw)

    monkeypatch.setattr(agent_compensation, "begin_tool_compensation", begin_after_the_end)
    return seen


def undos_sent(script) -> list[str]:
    return [call[1] for call in script.calls if call[0] == "write-note:compensate"]


def test_ended_after_one_call_was_undone_and_before_the_next_was_sent_nothing_is_in_doubt(
        script, monkeypatch, client):
    monkeypatch.setattr(agent_loop, "ask_model", notes_then_charge("low", "low"))
    run = start_saga("between-two")
    seen = ended_before_the_next_undo_is_sent(monkeypatch, run, after=1)

    run = advance_once(run)
    assert seen["run"].status == RunStatus.TERMINATED
    older, newer = ToolCall.objects.filter(step__run=run, tool="write-note").order_by("turn")
    assert state(newer) == (ToolCallStatus.COMPENSATED, "", "")
    assert state(older) == (ToolCallStatus.SUCCEEDED, "", "")  # its undo was never sent
    assist = step(run, "assist")
    assert (assist.status, assist.error_class, assist.error_message, assist.lease_owner) == (
        StepStatus.COMPENSATION_FAILED, ErrorClass.ENDED_UNDOING, ENDED_BEFORE_UNDONE, "")
    ended = AuditRecord.objects.get(run=run, action="terminated")
    assert ended.data["undos_left"] == {"assist": StepStatus.COMPENSATION_FAILED}
    # Nothing was in flight: no result came after the end, and none is waited for.
    assert not AuditRecord.objects.filter(
        run=run, action__in=("late_result", "late_result_recorded")).exists()
    assert undos_sent(script) == [newer.compensation_key]  # the newer note's, once
    assert step(run, "reserve").status == StepStatus.SUCCEEDED  # not carried on

    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert IN_FLIGHT_AT_END not in page and "may have been undone" not in page

    transitions.reopen(run.pk, actor=SYSTEM, reason="undo it after all")
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo it after all")
    assert advance_once(run).status == RunStatus.COMPENSATED
    assert state(older)[0] == ToolCallStatus.COMPENSATED
    assert step(run, "assist").status == StepStatus.COMPENSATED
    assert undos_sent(script) == [newer.compensation_key, older.compensation_key]


def test_ended_while_a_calls_failed_undo_waits_to_be_sent_again_it_stands_with_that_error(
        script, monkeypatch):
    """A high-impact note (written without asking anyone): the compensation pauses before
    its undo, a person confirms it, and the receiver answers busy: due again. The worker
    that claims the run for it is ahead of the person who ends the run (a second person
    agreeing): the undo was answered, so it failed, still standing."""
    monkeypatch.setattr(agent_loop, "ask_model", notes_then_charge("high"))
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]
    monkeypatch.setattr(tool, "impact", "high")
    monkeypatch.setattr(tool, "approve_if", lambda args: False)
    sent = []

    def busy(ctx, args):
        sent.append(ctx.key)
        raise TransientError("busy")

    monkeypatch.setattr(tool, "compensate_fn", busy)
    run = start_saga("busy-then-end")
    run = advance_once(run)
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED, run.status_message
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    transitions.confirm_compensation(run.pk, step_name="assist", call_ref=note.ref,
                                     actor=SYSTEM, reason="the note is wrong")
    run = advance_once(run)
    assert run.status == RunStatus.COMPENSATING  # busy: the undo is due again
    assert (state(note)[0], len(sent)) == (ToolCallStatus.COMPENSATING, 1)
    make_due(run)
    seen = ended_before_the_next_undo_is_sent(monkeypatch, run, after=0,
                                              approved_by=SECOND)

    run = advance_once(run)
    assert seen["run"].status == RunStatus.TERMINATED
    assert state(note) == (ToolCallStatus.COMPENSATION_FAILED, ErrorClass.TRANSIENT,
                           "TransientError: busy")
    assert seen["four_eyes"] == [
        f"assist: tool call {note.ref} write-note: undo failed: still stands"]
    assert state(step(run, "assist")) == (StepStatus.COMPENSATION_FAILED, ErrorClass.ENDED_UNDOING,
                                          ENDED_BEFORE_UNDONE)
    ended = AuditRecord.objects.get(run=run, action="terminated")
    assert ended.data["undos_left"] == {
        f"assist: tool call {note.ref} write-note": ToolCallStatus.COMPENSATION_FAILED,
        "assist": StepStatus.COMPENSATION_FAILED}
    assert sent == [note.compensation_key]  # the busy try only: nothing after the end
    assert not AuditRecord.objects.filter(
        run=run, action__in=("late_result", "late_result_recorded")).exists()


class WorkerDied(BaseException):
    """The worker's process ends here: no handler of the runtime's runs after it."""


def test_ended_after_its_last_call_was_undone_and_before_the_step_said_so_it_is_compensated(
        script, monkeypatch):
    """The worker recorded the undo of the step's last call to undo; a person ends the run;
    the worker dies before it records the step's own undo. Every call is undone: so is the
    step, though no late result will come to say it."""
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    run = start_saga("after-the-last")
    record = agent_compensation.record_tool_compensation

    def recorded_then_ended_then_died(*args, **kw):
        record(*args, **kw)
        transitions.terminate(run.pk, actor=SYSTEM, reason="guest left")
        raise WorkerDied

    monkeypatch.setattr(agent_compensation, "record_tool_compensation",
                        recorded_then_ended_then_died)
    with pytest.raises(WorkerDied):
        executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert state(note) == (ToolCallStatus.COMPENSATED, "", "")
    assist = step(run, "assist")
    assert (assist.status, assist.error_class, assist.error_message, assist.lease_owner) == (
        StepStatus.COMPENSATED, "", "", "")
    ended = AuditRecord.objects.get(run=run, action="terminated")
    assert ended.data["undos_left"] == {"assist": StepStatus.COMPENSATED}
    assert undos_sent(script) == [note.compensation_key]
