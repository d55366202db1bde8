"""A compensation held at an undo a release removed (compensation.hold_undo_missing) has
nothing in flight while it waits, and its rows say so: the step it stopped at is never left
"compensating", which the run page and the API read as an undo under way. An undo never
sent leaves its effect standing as before the compensation (succeeded); one sent and due
again (it failed, or its outcome is unknown) is a failed undo (compensation_failed), as
when its resends are spent. Compensating again once the undo is back undoes the effect
once, with its key. Ending the run from the hold weighs the effect that stands like any
other: a high-impact one needs a second person, who is told that it stands."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.machine import transitions
from runs.machine.errors import SecondPersonRequired, TransientError
from runs.models import AttentionReason, RunStatus, StepStatus, ToolCall, ToolCallStatus
from runs.operator.actions import ACTIONS
from tests.factories import SYSTEM, advance_once, make_due, step
from tests.workflows import note_then_charge

pytestmark = pytest.mark.django_db
SECOND = Actor.system("second")


def undos(script, name: str) -> list[tuple]:
    return [call for call in script.calls if call[0] == f"{name}:compensate"]


def held(run) -> AuditRecord:
    return AuditRecord.objects.get(run=run, action="definition_missing")


@pytest.fixture
def ledger_undo(monkeypatch):
    """Remove the ledger's undo, as a release would; `restore()` brings it back."""
    spec = registry.get("test-orders", 1).step("post-ledger")
    original = spec.compensate_fn

    class Undo:
        @staticmethod
        def remove():
            monkeypatch.setattr(spec, "compensate_fn", None)

        @staticmethod
        def restore():
            monkeypatch.setattr(spec, "compensate_fn", original)

    return Undo


def confirmed_ledger_undo(run):
    """Compensated (a second person agreeing), paused at the ledger, confirmed."""
    transitions.compensate(run.pk, actor=SYSTEM, reason="invoice withdrawn",
                           approved_by=SECOND)
    run = advance_once(run)
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED, run.status_message
    transitions.confirm_compensation(run.pk, step_name="post-ledger", actor=SYSTEM,
                                     reason="reversal checked")
    return run


def test_an_undo_sent_then_lost_is_a_failed_undo_not_one_under_way(script, task_run,
                                                                   monkeypatch):
    spec = registry.get("test-orders", 1).step("create-task")
    transitions.compensate(task_run.pk, actor=SYSTEM, reason="order withdrawn")
    script.plan["create-task:compensate"] = [TransientError("busy")]
    assert advance_once(task_run).status == RunStatus.COMPENSATING
    assert step(task_run, "create-task").status == StepStatus.COMPENSATING  # due again
    monkeypatch.setattr(spec, "compensate_fn", None)
    make_due(task_run)

    run = advance_once(task_run)
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.DEFINITION_MISSING)
    task = step(run, "create-task")
    assert task.status == StepStatus.COMPENSATION_FAILED
    assert (task.next_attempt_at, task.lease_owner) == (None, "")
    assert held(run).after["step_status"] == StepStatus.COMPENSATION_FAILED

    monkeypatch.undo()
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo restored")
    assert advance_once(run).status == RunStatus.COMPENSATED
    assert step(run, "create-task").status == StepStatus.COMPENSATED
    key = step(run, "create-task").compensation_key
    assert [call[1] for call in undos(script, "create-task")] == [key, key]  # busy, then sent
    assert len(script.compensations) == 1  # undone once


def test_a_confirmed_undo_lost_before_it_was_sent_leaves_the_effect_succeeded(
        script, ledger_run, ledger_undo):
    run = confirmed_ledger_undo(ledger_run)
    ledger_undo.remove()

    run = advance_once(run)
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.DEFINITION_MISSING)
    assert run.status_message.startswith("post-ledger: ")
    # Nothing was sent, so the posting stands as it did, and the older task is untouched.
    assert step(run, "post-ledger").status == StepStatus.SUCCEEDED
    assert step(run, "create-task").status == StepStatus.SUCCEEDED
    assert script.calls == [] and script.compensations == {}
    assert (held(run).before["step_status"], held(run).after["step_status"]) == (
        StepStatus.COMPENSATING, StepStatus.SUCCEEDED)

    # With the undo back, the person is asked again (what it sends now is this code's),
    # then each undo is sent once, newest first.
    ledger_undo.restore()
    run = confirmed_ledger_undo(run)
    assert advance_once(run).status == RunStatus.COMPENSATED
    assert [call[0] for call in script.calls] == ["post-ledger:compensate",
                                                  "create-task:compensate"]
    assert len(script.compensations) == 2
    assert step(run, "post-ledger").status == StepStatus.COMPENSATED


def held_at_the_ledger(run, script, ledger_undo, *, sent: bool):
    """A compensation held at the ledger's lost undo: confirmed and never sent, or sent
    once (busy: due again) before the release removed it."""
    run = confirmed_ledger_undo(run)
    if sent:
        script.plan["post-ledger:compensate"] = [TransientError("busy")]
        assert advance_once(run).status == RunStatus.COMPENSATING
    ledger_undo.remove()
    make_due(run)
    run = advance_once(run)
    assert run.status == RunStatus.COMPENSATION_FAILED, run.status_message
    return run


@pytest.mark.parametrize("sent, stands", [
    (False, "post-ledger: succeeded"),
    (True, "post-ledger: undo failed: still stands"),
])
def test_terminating_at_a_lost_high_impact_undo_needs_a_second_person_told_it_stands(
        script, ledger_run, ledger_undo, sent, stands):
    run = held_at_the_ledger(ledger_run, script, ledger_undo, sent=sent)
    steps = list(run.steps.order_by("position"))
    assert [str(e) for e in transitions.high_impact_effects(steps)] == [stands]
    assert ACTIONS["terminate"].needs_second_person(steps)

    with pytest.raises(SecondPersonRequired, match=stands):
        transitions.terminate(run.pk, actor=SYSTEM, reason="vendor fraud")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATION_FAILED

    run = transitions.terminate(run.pk, actor=SYSTEM, reason="vendor fraud",
                                approved_by=SECOND)
    assert run.status == RunStatus.TERMINATED
    # Ended, the posting is said to stand, never to be under way.
    assert step(run, "post-ledger").status == (StepStatus.COMPENSATION_FAILED if sent
                                               else StepStatus.SUCCEEDED)
    record = AuditRecord.objects.get(run=run, action="terminated")
    assert record.data["approved_by"] == SECOND.label
    assert len(undos(script, "post-ledger")) == (1 if sent else 0)
    assert script.compensations == {}


def test_an_agents_call_undo_sent_then_lost_leaves_no_row_compensating(script, monkeypatch):
    """The agent wrote a note, then its charge failed for good: undone by policy, the note's
    undo fails once (busy), then a release removes it."""
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]
    delete_note = tool.compensate_fn

    def busy(ctx, args):
        raise TransientError("busy")

    monkeypatch.setattr(tool, "compensate_fn", busy)
    run, _ = transitions.start_run(workflow="test-agent-saga", business_key="held-1",
                                   input={"order": "o-1"}, actor=SYSTEM, wake=False)
    assert advance_once(run).status == RunStatus.COMPENSATING
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert note.status == ToolCallStatus.COMPENSATING
    monkeypatch.setattr(tool, "compensate_fn", None)
    make_due(run)

    run = advance_once(run)
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.DEFINITION_MISSING)
    note.refresh_from_db()
    assert note.status == ToolCallStatus.COMPENSATION_FAILED
    assert step(run, "assist").status == StepStatus.COMPENSATION_FAILED
    assert step(run, "reserve").status == StepStatus.SUCCEEDED  # nothing undone behind it
    assert held(run).data["tool_calls"] == {note.ref: ToolCallStatus.COMPENSATION_FAILED}

    monkeypatch.setattr(tool, "compensate_fn", delete_note)
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo restored")
    assert advance_once(run).status == RunStatus.COMPENSATED
    note.refresh_from_db()
    assert note.status == ToolCallStatus.COMPENSATED
    assert [call[1] for call in undos(script, "write-note")] == [note.compensation_key]
    assert len(script.compensations) == 2  # the note's and the reservation's, once each


def test_an_agents_call_undo_lost_before_it_was_sent_leaves_the_call_succeeded(
        script, monkeypatch):
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    tools = registry.get("test-agent-saga", 1).step("assist").tools
    delete_note, charge = tools["write-note"].compensate_fn, tools["charge"].fn

    def released_then_charge(ctx, args):
        # The release lands after the note was written (with its undo's key), before the
        # charge fails and the compensation starts.
        monkeypatch.setattr(tools["write-note"], "compensate_fn", None)
        return charge(ctx, args)

    monkeypatch.setattr(tools["charge"], "fn", released_then_charge)
    run, _ = transitions.start_run(workflow="test-agent-saga", business_key="held-2",
                                   input={"order": "o-2"}, actor=SYSTEM, wake=False)

    run = advance_once(run)
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.DEFINITION_MISSING)
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert note.compensation_key and note.status == ToolCallStatus.SUCCEEDED
    # The agent step's compensation began (its intent was recorded) and cannot go on.
    assert step(run, "assist").status == StepStatus.COMPENSATION_FAILED
    assert undos(script, "write-note") == [] and script.compensations == {}

    monkeypatch.setattr(tools["write-note"], "compensate_fn", delete_note)
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo restored")
    assert advance_once(run).status == RunStatus.COMPENSATED
    assert [call[1] for call in undos(script, "write-note")] == [note.compensation_key]
    assert len(script.compensations) == 2  # the note's and the reservation's, once each
