"""A run a person ends (terminate, or cancel) in the middle of its compensation keeps no
step or tool call "compensating", which the run page and the API read as an undo under way:
nothing will send the undo again, nor record the outcome of one being sent (its worker is
fenced off). Each says what stands, by the rule a compensation held at a lost undo follows
(in_flight.not_undone): an undo never sent leaves its effect succeeded; one sent, due again
or still in flight, is a failed undo (the one in flight with its outcome unknown, until its
result arrives: a success is recorded on it). The run's record names each. Ending the run from there
weighs a high-impact effect being undone as one that stands: a second person must agree.
Reopened and compensated again, each effect is undone once, with its key."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.machine import transitions
from runs.machine.errors import SecondPersonRequired, TransientError
from runs.models import (
    AttentionReason,
    ErrorClass,
    RunStatus,
    StepStatus,
    ToolCall,
    ToolCallStatus,
)
from tests.factories import SYSTEM, advance_once, step
from tests.workflows import note_then_charge, start_saga

pytestmark = pytest.mark.django_db
SECOND = Actor.system("second")


def undos(script, name: str) -> list[tuple]:
    return [call for call in script.calls if call[0] == f"{name}:compensate"]


def ended(run) -> AuditRecord:
    return AuditRecord.objects.filter(run=run, action__in=("terminated", "cancelled")).get()


def compensated_again(run, **approval):
    """Reopened, compensated again and advanced to its end."""
    transitions.reopen(run.pk, actor=SYSTEM, reason="undo it after all")
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo it after all", **approval)
    return advance_once(run)


def test_terminating_while_an_undo_waits_to_be_sent_again_leaves_a_failed_undo(script,
                                                                                task_run):
    transitions.compensate(task_run.pk, actor=SYSTEM, reason="order withdrawn")
    script.plan["create-task:compensate"] = [TransientError("busy")]
    assert advance_once(task_run).status == RunStatus.COMPENSATING
    task = step(task_run, "create-task")
    assert task.status == StepStatus.COMPENSATING and task.next_attempt_at is not None
    assert task.lease_owner == ""  # nothing in flight: due again

    run = transitions.terminate(task_run.pk, actor=SYSTEM, reason="order void")
    assert run.status == RunStatus.TERMINATED
    task = step(run, "create-task")
    assert (task.status, task.next_attempt_at) == (StepStatus.COMPENSATION_FAILED, None)
    assert task.error_message == "TransientError: busy"  # why it failed stays on the row
    assert ended(run).data["undos_left"] == {"create-task": StepStatus.COMPENSATION_FAILED}
    assert step(run, "fetch").status == StepStatus.SUCCEEDED

    assert compensated_again(run).status == RunStatus.COMPENSATED
    key = step(run, "create-task").compensation_key
    assert [call[1] for call in undos(script, "create-task")] == [key, key]  # busy, then sent
    assert len(script.compensations) == 1


def test_terminating_while_an_undo_is_being_sent_records_it_failed_with_its_outcome_unknown(
        script, task_run, monkeypatch):
    """The person ends the run while the worker is sending the task's undo: the worker is
    fenced off, so the row is settled now, its outcome unknown; the success the worker
    brings later is recorded on it (late_outcomes.late_result), the run staying terminated."""
    spec = registry.get("test-orders", 1).step("create-task")
    cancel_task = spec.compensate_fn
    at_the_end = {}

    def terminated_meanwhile(ctx):
        transitions.terminate(task_run.pk, actor=SYSTEM, reason="order void")
        task = step(task_run, "create-task")
        at_the_end.update(status=task.status, lease_owner=task.lease_owner,
                          error=(task.error_class, task.error_message))
        return cancel_task(ctx)

    monkeypatch.setattr(spec, "compensate_fn", terminated_meanwhile)
    transitions.compensate(task_run.pk, actor=SYSTEM, reason="order withdrawn")

    run = advance_once(task_run)
    assert at_the_end == {"status": StepStatus.COMPENSATION_FAILED, "lease_owner": "",
                          "error": (ErrorClass.ENDED_IN_DOUBT,
                                    "in flight when the run was terminated")}
    assert ended(run).data["undos_left"] == {"create-task": StepStatus.COMPENSATION_FAILED}
    assert (run.status, run.lease_owner) == (RunStatus.TERMINATED, "")
    task = step(run, "create-task")
    assert (task.status, task.lease_owner, task.error_message) == (StepStatus.COMPENSATED,
                                                                   "", "")
    late = AuditRecord.objects.get(run=run, action="late_result_recorded")
    assert late.step_name == "create-task" and late.data["succeeded"] is True
    assert len(script.compensations) == 1  # it did land, once


def confirmed_ledger_undo(run):
    """Compensated (a second person agreeing), paused at the ledger, confirmed."""
    transitions.compensate(run.pk, actor=SYSTEM, reason="invoice withdrawn",
                           approved_by=SECOND)
    run = advance_once(run)
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED, run.status_message
    transitions.confirm_compensation(run.pk, step_name="post-ledger", actor=SYSTEM,
                                     reason="reversal checked")
    run.refresh_from_db()
    return run


@pytest.mark.parametrize("sent, left", [
    (False, StepStatus.SUCCEEDED),
    (True, StepStatus.COMPENSATION_FAILED),
])
def test_terminating_a_high_impact_undo_under_way_needs_a_second_person_and_leaves_it_standing(
        script, ledger_run, sent, left):
    run = confirmed_ledger_undo(ledger_run)
    if sent:
        script.plan["post-ledger:compensate"] = [TransientError("busy")]
        run = advance_once(run)
    assert run.status == RunStatus.COMPENSATING
    assert step(run, "post-ledger").status == StepStatus.COMPENSATING

    with pytest.raises(SecondPersonRequired, match="post-ledger: being undone"):
        transitions.terminate(run.pk, actor=SYSTEM, reason="vendor fraud")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATING
    assert step(run, "post-ledger").status == StepStatus.COMPENSATING

    run = transitions.terminate(run.pk, actor=SYSTEM, reason="vendor fraud",
                                approved_by=SECOND)
    assert run.status == RunStatus.TERMINATED
    # Never sent, the posting stands as it did; sent, its undo failed: it stands.
    assert step(run, "post-ledger").status == left
    assert step(run, "create-task").status == StepStatus.SUCCEEDED
    record = ended(run)
    assert record.data["approved_by"] == SECOND.label
    assert record.data["undos_left"] == {"post-ledger": left}
    assert len(undos(script, "post-ledger")) == (1 if sent else 0)
    assert script.compensations == {}


def test_terminating_while_a_tool_calls_undo_waits_to_be_sent_again_leaves_no_row_compensating(
        script, monkeypatch):
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]
    delete_note = tool.compensate_fn

    def busy(ctx, args):
        raise TransientError("busy")

    monkeypatch.setattr(tool, "compensate_fn", busy)
    run = advance_once(start_saga("ended-1"))
    assert run.status == RunStatus.COMPENSATING
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert note.status == ToolCallStatus.COMPENSATING
    assert step(run, "assist").status == StepStatus.COMPENSATING

    run = transitions.terminate(run.pk, actor=SYSTEM, reason="guest left")
    assert run.status == RunStatus.TERMINATED
    note.refresh_from_db()
    assert (note.status, note.next_attempt_at) == (ToolCallStatus.COMPENSATION_FAILED, None)
    # Its last try's error, which its step kept while it waited to be sent again.
    assert (note.error_class, note.error_message) == (ErrorClass.TRANSIENT,
                                                      "TransientError: busy")
    assert step(run, "assist").status == StepStatus.COMPENSATION_FAILED
    assert step(run, "reserve").status == StepStatus.SUCCEEDED  # nothing undone behind it
    assert ended(run).data["undos_left"] == {
        f"assist: tool call {note.ref} write-note": ToolCallStatus.COMPENSATION_FAILED,
        "assist": StepStatus.COMPENSATION_FAILED}

    monkeypatch.setattr(tool, "compensate_fn", delete_note)
    assert compensated_again(run).status == RunStatus.COMPENSATED
    note.refresh_from_db()
    assert note.status == ToolCallStatus.COMPENSATED
    assert [call[1] for call in undos(script, "write-note")] == [note.compensation_key]
    assert len(script.compensations) == 2  # the note's and the reservation's, once each


@pytest.mark.parametrize("end", ["terminate", "cancel"])
def test_ending_a_compensation_paused_at_a_high_impact_calls_undo_leaves_its_step_not_undone(
        script, monkeypatch, end):
    """A high-impact note (written without asking anyone): the compensation by policy
    pauses before its undo, the agent step compensating (its undo is its calls'). Ended
    there, nothing was sent."""
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]
    monkeypatch.setattr(tool, "impact", "high")
    monkeypatch.setattr(tool, "approve_if", lambda args: False)
    run = advance_once(start_saga(f"ended-paused-{end}"))
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.COMPENSATION_PAUSED)
    assert step(run, "assist").status == StepStatus.COMPENSATING
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    with pytest.raises(SecondPersonRequired, match=f"tool call {note.ref} write-note: succeeded"):
        getattr(transitions, end)(run.pk, actor=SYSTEM, reason="guest left")

    run = getattr(transitions, end)(run.pk, actor=SYSTEM, reason="guest left",
                                    approved_by=SECOND)
    assert run.status == RunStatus.TERMINATED
    note.refresh_from_db()
    assert note.status == ToolCallStatus.SUCCEEDED  # never sent: it stands
    # The step's own undo had begun (its intent recorded): its calls say what stands.
    assert step(run, "assist").status == StepStatus.COMPENSATION_FAILED
    assert ended(run).data["undos_left"] == {"assist": StepStatus.COMPENSATION_FAILED}
    assert undos(script, "write-note") == [] and script.compensations == {}
