"""A person ends a run while the undo of one of its agent's tool calls is in flight: the end
leaves the call's undo in doubt (compensation_failed, ended_in_doubt), and the agent
step's with it, since the step's undo is its calls' (in_flight.undos_left). When the
answer comes (a worker's late result, or a person's undo of one call), the call is undone;
once none of the step's calls is left in doubt (one whose undo failed stands, and says so
itself), the step says what stands by the one rule an agent's compensation follows
(in_flight.undone_by_calls): compensated when no call of it has an undo to come, else its
undo failed, no longer in doubt. While another call is still in doubt, the step stays as
it is. The record of the settle names the step's move; the run stays as it ended, its
compensation not carried on. The four-eyes list and the run page then say the same:
nothing "may have been undone"."""

import pytest
from django.contrib.auth.models import User

from audit.chain import Actor
from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.machine import transitions
from runs.models import (
    AttentionReason,
    ErrorClass,
    RunStatus,
    StepStatus,
    ToolCall,
    ToolCallStatus,
)
from tests.factories import SYSTEM, advance_once, step
from tests.workflows import notes_then_charge, start_saga

pytestmark = pytest.mark.django_db
SECOND = Actor.system("second")
IN_FLIGHT_AT_END = "in flight when the run was terminated"
IN_DOUBT = (StepStatus.COMPENSATION_FAILED, ErrorClass.ENDED_IN_DOUBT, IN_FLIGHT_AT_END)


def state(row) -> tuple:
    row.refresh_from_db()
    return row.status, row.error_class, row.error_message


@pytest.fixture
def note_tool(monkeypatch):
    """The note tool of test-agent-saga; a high-impact note is written without asking
    anyone (its undo still pauses for a person)."""
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]
    monkeypatch.setattr(tool, "approve_if", lambda args: False)
    return tool


def ended_while_undone(run, tool, monkeypatch, **approval) -> tuple[dict, object]:
    """The first note undo a worker sends after this: a person ends the run meanwhile
    (with `approval`), and the undo lands. Returns what was seen right after the end (the
    run, and the four-eyes list of high-impact effects) and the note's real undo."""
    real_undo, seen = tool.compensate_fn, {}

    def undo(ctx, args):
        if not seen:
            seen["run"] = transitions.terminate(run.pk, actor=SYSTEM, reason="guest left",
                                                **approval)
            seen["four_eyes"] = [str(e) for e in transitions.high_impact_effects(
                list(run.steps.order_by("position")))]
        return real_undo(ctx, args)

    monkeypatch.setattr(tool, "compensate_fn", undo)
    return seen, real_undo


def settled(run) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(run=run, action="late_result_recorded")
                .order_by("seq"))


def test_the_late_undo_of_its_last_call_leaves_the_agent_step_compensated(
        script, monkeypatch, note_tool, client):
    monkeypatch.setattr(agent_loop, "ask_model",
                        notes_then_charge("low", tool=note_tool, monkeypatch=monkeypatch))
    run = start_saga("late-last")
    seen, _ = ended_while_undone(run, note_tool, monkeypatch)

    run = advance_once(run)
    assert seen["run"].status == RunStatus.TERMINATED
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert note.status == ToolCallStatus.COMPENSATED
    # The charge failed for good: nothing of it stands, so nothing of the step does.
    assert ToolCall.objects.get(step__run=run, tool="charge").status == ToolCallStatus.FAILED
    assist = step(run, "assist")
    assert (assist.status, assist.error_class, assist.error_message) == (
        StepStatus.COMPENSATED, "", "")
    (late,) = settled(run)
    assert (late.step_name, late.data["tool_call"]) == ("assist", note.ref)
    assert late.data["step_status"] == {"before": StepStatus.COMPENSATION_FAILED,
                                        "after": StepStatus.COMPENSATED}
    # Only those rows moved: the run stays ended, the reservation is not undone.
    assert run.status == RunStatus.TERMINATED
    assert step(run, "reserve").status == StepStatus.SUCCEEDED
    assert AuditRecord.objects.filter(run=run, action="late_result").count() == 0
    assert len(script.compensations) == 1  # the note's, once

    # The run page says what the rows say: no undo in doubt is left on it.
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert IN_FLIGHT_AT_END not in page and "may have been undone" not in page


def test_a_call_whose_undo_was_never_sent_leaves_the_step_a_failed_undo_no_longer_in_doubt(
        script, monkeypatch, note_tool):
    """Two notes: the run is ended while the newer one's undo is sent, before the older
    one's. Once the newer one is undone, the older one still stands: the step's undo
    failed, and nothing of it is in doubt. Compensated again, the older note is undone
    once, and the step with it."""
    monkeypatch.setattr(agent_loop, "ask_model", notes_then_charge(
        "low", "low", tool=note_tool, monkeypatch=monkeypatch))
    run = start_saga("late-one-of-two")
    seen, real_undo = ended_while_undone(run, note_tool, monkeypatch)

    run = advance_once(run)
    assert seen["run"].status == RunStatus.TERMINATED
    older, newer = ToolCall.objects.filter(step__run=run, tool="write-note").order_by("turn")
    assert (older.status, newer.status) == (ToolCallStatus.SUCCEEDED,
                                            ToolCallStatus.COMPENSATED)
    assist = step(run, "assist")
    assert assist.status == StepStatus.COMPENSATION_FAILED
    assert (assist.error_class, assist.error_message) == (
        ErrorClass.ENDED_UNDOING, "ended by a person before every tool call of it was undone")
    (late,) = settled(run)
    assert late.data["tool_call"] == newer.ref
    assert late.data["step_status"] == {"before": StepStatus.COMPENSATION_FAILED,
                                        "after": StepStatus.COMPENSATION_FAILED}
    assert run.status == RunStatus.TERMINATED

    monkeypatch.setattr(note_tool, "compensate_fn", real_undo)
    transitions.reopen(run.pk, actor=SYSTEM, reason="undo it after all")
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo it after all")
    assert advance_once(run).status == RunStatus.COMPENSATED
    assert state(older)[0] == ToolCallStatus.COMPENSATED
    assert step(run, "assist").status == StepStatus.COMPENSATED
    sent = [call[1] for call in script.calls if call[0] == "write-note:compensate"]
    assert sent == [newer.compensation_key, older.compensation_key]  # each once


def test_the_step_stays_in_doubt_until_its_last_call_is_settled_whoever_sends_it(
        script, monkeypatch, note_tool):
    """An older low-impact note, which a person undoes alone, and a newer high-impact one,
    whose undo the compensation paused at and a person confirmed. The run is ended (a
    second person agreeing) while a worker sends the newer note's undo: both undos are in
    doubt, and the step. The worker's success settles the newer note only; the step stays
    in doubt until the person's answer settles the older one."""
    monkeypatch.setattr(agent_loop, "ask_model", notes_then_charge(
        "low", "high", tool=note_tool, monkeypatch=monkeypatch))
    run = advance_once(start_saga("late-two-senders"))
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED, run.status_message
    older, newer = ToolCall.objects.filter(step__run=run, tool="write-note").order_by("turn")
    assert (older.impact, newer.impact) == ("low", "high")
    by_person = transitions.begin_tool_call_undo(run.pk, step_name="assist",
                                                 call_ref=older.ref, actor=SYSTEM,
                                                 reason="the room is not needed")
    transitions.confirm_compensation(run.pk, step_name="assist", call_ref=newer.ref,
                                     actor=SYSTEM, reason="the taxi is not needed")
    seen, _ = ended_while_undone(run, note_tool, monkeypatch, approved_by=SECOND)

    run = advance_once(run)
    assert seen["run"].status == RunStatus.TERMINATED
    assert seen["four_eyes"] == [
        f"assist: tool call {newer.ref} write-note: undo outcome unknown: may have been undone"]
    assert state(newer)[0] == ToolCallStatus.COMPENSATED
    assert state(older) == IN_DOUBT
    assert state(step(run, "assist")) == IN_DOUBT  # the older note's undo is in doubt still
    (late,) = settled(run)
    assert late.data["tool_call"] == newer.ref and "step_status" not in late.data
    assert transitions.high_impact_effects(list(run.steps.order_by("position"))) == []

    transitions.record_tool_call_undo(run.pk, call_id=older.pk,
                                      attempt=by_person.compensation_attempt, actor=SYSTEM,
                                      remote_ref="NOTE-1-DELETED")
    assert state(older) == (ToolCallStatus.COMPENSATED, "", "")
    assert state(step(run, "assist")) == (StepStatus.COMPENSATED, "", "")
    late = settled(run)[-1]
    assert late.data["tool_call"] == older.ref
    assert late.data["step_status"] == {"before": StepStatus.COMPENSATION_FAILED,
                                        "after": StepStatus.COMPENSATED}
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    assert step(run, "reserve").status == StepStatus.SUCCEEDED  # not carried on
    # The worker sent the newer note's undo only; the person's was answered by hand.
    assert [c[1] for c in script.calls if c[0] == "write-note:compensate"] == [
        newer.compensation_key]


def test_a_call_whose_undo_failed_for_good_leaves_the_step_a_failed_undo_once_none_is_in_doubt(
        script, monkeypatch, note_tool):
    """As above, but the person's undo of the older note failed for good before the end:
    that note stands, and says so itself. Once the worker's late success settles the newer
    note, nothing of the step is in doubt: its undo failed, as the end would have made it
    had no undo been in flight, and the older note keeps its own error."""
    monkeypatch.setattr(agent_loop, "ask_model", notes_then_charge(
        "low", "high", tool=note_tool, monkeypatch=monkeypatch))
    run = advance_once(start_saga("late-one-failed"))
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED, run.status_message
    older, newer = ToolCall.objects.filter(step__run=run, tool="write-note").order_by("turn")
    by_person = transitions.begin_tool_call_undo(run.pk, step_name="assist",
                                                 call_ref=older.ref, actor=SYSTEM,
                                                 reason="the room is not needed")
    transitions.record_tool_call_undo(run.pk, call_id=older.pk,
                                      attempt=by_person.compensation_attempt, actor=SYSTEM,
                                      error="the note is locked",
                                      error_class=ErrorClass.PERMANENT)
    failed = (ToolCallStatus.COMPENSATION_FAILED, ErrorClass.PERMANENT, "the note is locked")
    assert state(older) == failed
    transitions.confirm_compensation(run.pk, step_name="assist", call_ref=newer.ref,
                                     actor=SYSTEM, reason="the taxi is not needed")
    seen, _ = ended_while_undone(run, note_tool, monkeypatch, approved_by=SECOND)

    run = advance_once(run)
    assert seen["run"].status == RunStatus.TERMINATED
    assert state(newer)[0] == ToolCallStatus.COMPENSATED
    assert state(older) == failed  # its own error, not the end's
    assert state(step(run, "assist")) == (
        StepStatus.COMPENSATION_FAILED, ErrorClass.ENDED_UNDOING,
        "ended by a person before every tool call of it was undone")
    (late,) = settled(run)
    assert late.data["tool_call"] == newer.ref
    assert late.data["step_status"] == {"before": StepStatus.COMPENSATION_FAILED,
                                        "after": StepStatus.COMPENSATION_FAILED}
    # Nothing of it may have been undone: the older note stands, the newer is undone.
    assert [str(e) for e in transitions.high_impact_effects(
        list(run.steps.order_by("position")))] == []
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    assert [c[1] for c in script.calls if c[0] == "write-note:compensate"] == [
        newer.compensation_key]  # the older note's undo was the person's, never sent here
