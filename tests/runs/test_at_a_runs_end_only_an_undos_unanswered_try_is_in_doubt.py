"""Where a person ends a run, an undo is in doubt only while its last try is unanswered
(in_flight.undo_unanswered): sent (its intent recorded) and no outcome since. An answer
that failed makes it due again; a new try makes it unanswered again, whatever an earlier
try answered. So an undo sent again after a failed try and ended meanwhile is in doubt (and
its late success is recorded on it), while a failed undo that a new compensation means to
send again, ended before any worker sent it, stays a failed undo with its error."""

import pytest

from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.machine import transitions
from runs.machine.errors import PermanentError, TransientError
from runs.models import ErrorClass, RunStatus, StepStatus, ToolCall, ToolCallStatus
from tests.factories import SYSTEM, advance_once, make_due, step
from tests.workflows import note_then_charge, start_saga

pytestmark = pytest.mark.django_db
IN_DOUBT = (StepStatus.COMPENSATION_FAILED, ErrorClass.ENDED_IN_DOUBT,
            "in flight when the run was terminated")


def state(row) -> tuple:
    row.refresh_from_db()
    return row.status, row.error_class, row.error_message


def test_a_calls_undo_sent_again_after_a_busy_answer_and_ended_meanwhile_is_in_doubt(
        script, monkeypatch):
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]
    delete_note, seen = tool.compensate_fn, {}

    def busy_then_ended_while_sent(ctx, args):
        if not seen:
            seen["busy"] = ctx.key
            raise TransientError("busy")
        run = transitions.terminate(ctx.run_id, actor=SYSTEM, reason="guest left")
        seen["at_the_end"] = (run.status, state(note_row()), state(step(run, "assist")))
        return delete_note(ctx, args)

    def note_row():
        return ToolCall.objects.get(step__run_id=run.pk, tool="write-note")

    monkeypatch.setattr(tool, "compensate_fn", busy_then_ended_while_sent)
    run = start_saga("sent-again")
    assert advance_once(run).status == RunStatus.COMPENSATING  # busy: due again
    make_due(run)

    run = advance_once(run)
    assert seen["at_the_end"] == (RunStatus.TERMINATED, IN_DOUBT, IN_DOUBT)
    # The undo did land: its late success is recorded on the call, and on its step.
    note = note_row()
    assert state(note) == (ToolCallStatus.COMPENSATED, "", "")
    assert state(step(run, "assist")) == (StepStatus.COMPENSATED, "", "")
    assert run.status == RunStatus.TERMINATED
    sent = [call[1] for call in script.calls if call[0] == "write-note:compensate"]
    assert sent == [note.compensation_key] and seen["busy"] == note.compensation_key
    assert len(script.compensations) == 1  # the note's, once; the reservation stands
    assert step(run, "reserve").status == StepStatus.SUCCEEDED


def test_a_failed_undo_compensated_again_and_ended_before_it_is_sent_keeps_its_error(
        script, task_run):
    script.plan["create-task:compensate"] = [PermanentError("task is locked")]
    transitions.compensate(task_run.pk, actor=SYSTEM, reason="order withdrawn")
    assert advance_once(task_run).status == RunStatus.COMPENSATION_FAILED
    task = step(task_run, "create-task")
    failed = (StepStatus.COMPENSATION_FAILED, ErrorClass.PERMANENT,
              "PermanentError: task is locked")
    assert state(task) == failed

    transitions.compensate(task_run.pk, actor=SYSTEM, reason="the task is unlocked")
    assert state(task)[0] == StepStatus.COMPENSATING  # to be sent again by a worker
    run = transitions.terminate(task_run.pk, actor=SYSTEM, reason="order void")

    assert run.status == RunStatus.TERMINATED
    assert state(task) == failed  # answered: a failed undo, not one in doubt
    sent = [call[1] for call in script.calls if call[0] == "create-task:compensate"]
    assert sent == [task.compensation_key]  # once, before the end
    assert script.compensations == {}
