"""Where an agent step's undo stops with nothing to carry it on, no tool call of it is left
compensating: its undo failed (its resends spent, or refused for good), a release removed
the undo (the hold at a lost undo), or a person ended the run. Each way puts the call in
the same state by one function (in_flight.calls_not_undone): a failed undo, with the error
of its last try, which says why it failed. An error an earlier try left on the row no
longer does, so it is never what the row shows."""

import pytest

from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.machine import transitions
from runs.machine.errors import PermanentError, TransientError
from runs.models import AttentionReason, ErrorClass, RunStatus, StepStatus, ToolCall, ToolCallStatus
from tests.factories import SYSTEM, advance_once, make_due, step
from tests.workflows import note_then_charge, start_saga

pytestmark = pytest.mark.django_db


@pytest.fixture
def note_undo(monkeypatch):
    """The note's undo answers each time with the next of `answers` (an error raised)."""
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]
    answers: list[Exception] = []

    def undo(ctx, args):
        raise answers.pop(0)

    monkeypatch.setattr(tool, "compensate_fn", undo)
    return tool, answers


def refused_then_compensated_again(answers: list, then: Exception):
    """A run whose note's undo was refused for good ("locked"), compensated again by a
    person: the undo is sent again with its key and answers `then`."""
    answers[:] = [PermanentError("note is locked"), then]
    run = start_saga("tried-twice")
    run = advance_once(run)
    assert run.status == RunStatus.COMPENSATION_FAILED, run.status_message
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert (note.status, note.error_message) == (ToolCallStatus.COMPENSATION_FAILED,
                                                 "PermanentError: note is locked")
    transitions.compensate(run.pk, actor=SYSTEM, reason="the note is unlocked")
    return advance_once(run), note


def test_an_undo_refused_again_says_the_newer_refusal(script, note_undo):
    _, answers = note_undo
    run, note = refused_then_compensated_again(answers, PermanentError("note is archived"))
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.COMPENSATION_FAILED)
    note.refresh_from_db()
    assert (note.status, note.error_class, note.error_message) == (
        ToolCallStatus.COMPENSATION_FAILED, ErrorClass.PERMANENT,
        "PermanentError: note is archived")
    assert step(run, "assist").status == StepStatus.COMPENSATION_FAILED


@pytest.mark.parametrize("stop", ["a release removes the undo", "a person ends the run"])
def test_an_undo_waiting_to_be_sent_again_where_it_stops_says_its_last_try(
        script, note_undo, monkeypatch, stop):
    tool, answers = note_undo
    run, note = refused_then_compensated_again(answers, TransientError("busy"))
    assert run.status == RunStatus.COMPENSATING  # busy: the undo is due again
    note.refresh_from_db()
    assert note.status == ToolCallStatus.COMPENSATING

    if stop == "a release removes the undo":
        monkeypatch.setattr(tool, "compensate_fn", None)
        make_due(run)
        run = advance_once(run)
        assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                      AttentionReason.DEFINITION_MISSING)
    else:
        run = transitions.terminate(run.pk, actor=SYSTEM, reason="guest left")
        assert run.status == RunStatus.TERMINATED

    note.refresh_from_db()
    assert (note.status, note.next_attempt_at) == (ToolCallStatus.COMPENSATION_FAILED, None)
    # Busy, as its last try answered: not the refusal an earlier compensation met.
    assert (note.error_class, note.error_message) == (ErrorClass.TRANSIENT,
                                                      "TransientError: busy")
    assert step(run, "assist").status == StepStatus.COMPENSATION_FAILED
    assert answers == []  # nothing was sent after the stop
