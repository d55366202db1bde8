"""A person ends a run while an undo is in flight: the run's end settles the row at once as a
failed undo whose outcome is unknown (in_flight.undo_ended: compensation_failed, "in flight
when the run was terminated"), and the worker sending it is fenced off. When that worker's
result arrives, it is recorded on the row, as a forward effect's late result is
(late_outcomes.late_result), since nobody else will: a successful undo leaves the effect
compensated, with one late_result_recorded record; the run stays terminated, its
compensation not carried on. A failed one is kept as evidence only: the row still says the
undo failed, and compensating again sends it again with its key."""

import pytest
from django.utils import timezone

from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.context import build_context
from runs.machine.errors import TransientError
from runs.machine.keys import tool_call_key, tool_compensation_key
from runs.machine.transitions.agent_calls import args_hash
from runs.models import (
    AttentionReason,
    ErrorClass,
    RunStatus,
    Step,
    StepStatus,
    ToolCall,
    ToolCallStatus,
)
from tests.factories import SYSTEM, make_due, new_run, place, step
from tests.workflows import note_then_charge, start_saga

pytestmark = pytest.mark.django_db
IN_FLIGHT_AT_END = "in flight when the run was terminated"


def records(run, action: str) -> list[AuditRecord]:
    return list(AuditRecord.objects.filter(run=run, action=action).order_by("seq"))


def undo_sent(run, name: str):
    """A worker claims the run being compensated and sends the undo of step `name` (its
    intent recorded, its lease held): returns the lease and the outcome it brings back."""
    lease = transitions.claim_run(run.pk, worker="w1")
    assert lease.compensating and lease.work.name == name
    ctx = build_context(lease.run, lease.steps, lease.work, definition=lease.definition,
                        services=None, compensating=True)
    return lease, executor.call_compensation(lease.definition.step(name), ctx)


def ended_meanwhile(run):
    run = transitions.terminate(run.pk, actor=SYSTEM, reason="order void")
    assert run.status == RunStatus.TERMINATED
    return run


@pytest.fixture
def task_being_undone(task_run):
    """The task created last (a low-impact undo), compensated by a person."""
    transitions.compensate(task_run.pk, actor=SYSTEM, reason="order withdrawn")
    return task_run


def test_a_successful_undo_arriving_after_the_run_ended_leaves_the_step_compensated(
        script, task_being_undone):
    lease, outcome = undo_sent(task_being_undone, "create-task")
    assert outcome.succeeded and len(script.compensations) == 1
    run = ended_meanwhile(task_being_undone)
    task = step(run, "create-task")
    assert (task.status, task.error_class, task.error_message) == (
        StepStatus.COMPENSATION_FAILED, ErrorClass.ENDED_IN_DOUBT, IN_FLIGHT_AT_END)

    transitions.record_outcome(lease, lease.work, outcome)
    run.refresh_from_db()
    assert (run.status, run.lease_owner) == (RunStatus.TERMINATED, "")
    task = step(run, "create-task")
    assert task.status == StepStatus.COMPENSATED
    assert task.compensation_ref == outcome.remote_ref != ""
    assert (task.error_class, task.error_message) == ("", "")  # the undo landed after all
    (late,) = records(run, "late_result_recorded")
    assert late.step_name == "create-task"
    assert late.before == {"step_status": StepStatus.COMPENSATION_FAILED}
    assert late.after == {"step_status": StepStatus.COMPENSATED,
                          "compensation_ref": outcome.remote_ref}
    assert late.data["succeeded"] is True and late.data["claim"] == lease.token
    assert records(run, "late_result") == []
    # Nothing else moved: the run's compensation was not carried on.
    assert step(run, "fetch").status == StepStatus.SUCCEEDED
    assert records(run, "compensated") == [] and len(script.compensations) == 1


def test_a_failed_undo_arriving_after_the_run_ended_is_evidence_only(script, task_being_undone):
    script.plan["create-task:compensate"] = [TransientError("busy")]
    lease, outcome = undo_sent(task_being_undone, "create-task")
    assert not outcome.succeeded
    run = ended_meanwhile(task_being_undone)

    transitions.record_outcome(lease, lease.work, outcome)
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    task = step(run, "create-task")
    assert (task.status, task.error_message) == (StepStatus.COMPENSATION_FAILED,
                                                 IN_FLIGHT_AT_END)
    (late,) = records(run, "late_result")
    assert late.data["succeeded"] is False and late.data["error"] == "TransientError: busy"
    assert records(run, "late_result_recorded") == []

    # Compensated again, the undo is sent again with its key, and undone once.
    transitions.reopen(run.pk, actor=SYSTEM, reason="undo it after all")
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo it after all")
    executor.advance_run(run.pk, worker="w2")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATED, run.status_message
    task = step(run, "create-task")
    assert task.status == StepStatus.COMPENSATED
    sent = [call[1] for call in script.calls if call[0] == "create-task:compensate"]
    assert sent == [task.compensation_key, task.compensation_key]
    assert len(script.compensations) == 1


def test_a_late_success_of_a_forward_effects_worker_never_counts_as_an_undo(
        script, task_being_undone):
    """The row reads as an undo in flight at the end, but the result is of a lease that
    sent the effect itself: it is evidence only, never the undo's outcome."""
    lease, outcome = undo_sent(task_being_undone, "create-task")
    run = ended_meanwhile(task_being_undone)
    lease.compensating = False  # as a forward worker's lease
    transitions.record_outcome(lease, lease.work, outcome)
    assert step(run, "create-task").status == StepStatus.COMPENSATION_FAILED
    assert len(records(run, "late_result")) == 1
    assert records(run, "late_result_recorded") == []


def test_an_agent_steps_undo_done_when_the_run_ended_is_recorded_compensated(
        script, monkeypatch):
    """The worker undid the agent's note, and the run was ended before it recorded the
    agent step's own undo: no undo of it was sent unanswered, so nothing is in doubt, and
    none of its calls is left to undo: the end says it is compensated, by what its calls
    say. The late outcome of the step's own undo is kept as evidence and changes nothing."""
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    assist = registry.get("test-agent-saga", 1).step("assist")
    tool = assist.tools["write-note"]
    delete_note = tool.compensate_fn
    script.plan["write-note:compensate"] = [TransientError("busy")]

    def busy_once(ctx, args):
        if script.plan["write-note:compensate"]:
            raise script.plan["write-note:compensate"].pop(0)
        return delete_note(ctx, args)

    monkeypatch.setattr(tool, "compensate_fn", busy_once)
    run = start_saga("late-agent")
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATING  # the note's undo is due again
    make_due(run)

    lease = transitions.claim_run(run.pk, worker="w2")
    assert lease.compensating and lease.work.name == "assist"
    ctx = build_context(lease.run, lease.steps, lease.work, definition=lease.definition,
                        services=None, compensating=True)
    outcome = agent_loop.compensate_agent_step(lease, lease.work, assist, ctx)
    assert isinstance(outcome, transitions.Outcome) and outcome.succeeded
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert note.status == ToolCallStatus.COMPENSATED
    run = ended_meanwhile(run)
    assist = step(run, "assist")
    assert (assist.status, assist.error_class, assist.error_message) == (
        StepStatus.COMPENSATED, "", "")

    transitions.record_outcome(lease, lease.work, outcome)
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    assert step(run, "assist").status == StepStatus.COMPENSATED
    assert step(run, "reserve").status == StepStatus.SUCCEEDED  # not carried on
    assert not records(run, "late_result_recorded")
    (late,) = records(run, "late_result")
    assert late.step_name == "assist"
    assert len(script.compensations) == 1  # the note's, once


def test_a_tool_calls_undo_done_when_the_run_ended_is_recorded_on_the_call(
        script, monkeypatch):
    """The run is ended while the worker sends the undo of the agent's note: the note's
    undo is left in doubt by the end, and the worker's success, fenced off, settles it."""
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    assist = registry.get("test-agent-saga", 1).step("assist")
    tool = assist.tools["write-note"]
    delete_note = tool.compensate_fn
    ended = []

    def ended_while_sent(ctx, args):
        ended.append(ended_meanwhile(ctx_run))
        return delete_note(ctx, args)

    monkeypatch.setattr(tool, "compensate_fn", ended_while_sent)
    run = start_saga("late-call")
    ctx_run = run
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert ended and run.status == RunStatus.TERMINATED

    note = ToolCall.objects.get(step__run=run, tool="write-note")
    assert note.status == ToolCallStatus.COMPENSATED
    assert note.error_message == ""
    (late,) = records(run, "late_result_recorded")
    assert late.step_name == "assist"
    assert records(run, "late_result") == []
    assert len(script.compensations) == 1  # the note's, once
    assert step(run, "reserve").status == StepStatus.SUCCEEDED  # not carried on


def test_a_persons_undo_of_one_call_answered_after_the_run_ended_is_recorded_on_it(script):
    """A person's undo of one tool call is sent, the run is ended before it answers (the
    call is in doubt: no worker holds the step, the person's request does), and the answer
    then settles it, as a worker's late undo does."""
    run = place(new_run("test-agent"), status=RunStatus.ATTENTION,
                attention_reason=AttentionReason.PERMANENT_ERROR,
                step_statuses={"assist": "failed"})
    key = tool_call_key(run.workflow_name, run.business_key, "assist", 1, 1, 0, "write-note")
    call = ToolCall.objects.create(
        step=Step.objects.get(run=run, name="assist"), turn=1, index=0, call_id="c1",
        tool="write-note", kind="write", arguments={"text": "hi"},
        args_hash=args_hash({"text": "hi"}), status=ToolCallStatus.SUCCEEDED,
        idempotency_key=key, compensation_key=tool_compensation_key(key), attempt=1,
        remote_ref="NOTE-1", started_at=timezone.now(), updated_at=timezone.now())
    sent = transitions.begin_tool_call_undo(run.pk, step_name="assist", call_ref=call.ref,
                                            actor=SYSTEM, reason="note withdrawn")
    ended_meanwhile(run)
    call.refresh_from_db()
    assert (call.status, call.error_class, call.error_message) == (
        ToolCallStatus.COMPENSATION_FAILED, ErrorClass.ENDED_IN_DOUBT, IN_FLIGHT_AT_END)

    transitions.record_tool_call_undo(run.pk, call_id=call.pk,
                                      attempt=sent.compensation_attempt, actor=SYSTEM,
                                      remote_ref="NOTE-1-DELETED")
    call.refresh_from_db()
    assert (call.status, call.compensation_ref, call.error_message) == (
        ToolCallStatus.COMPENSATED, "NOTE-1-DELETED", "")
    assert len(records(run, "late_result_recorded")) == 1
    assert records(run, "late_result") == []
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED


def test_a_late_undo_of_an_earlier_effect_never_settles_the_one_a_rerun_made(
        script, task_being_undone):
    """A rerun gives a step new keys: an undo answered under the old key says nothing of
    the new effect's undo, which stays in doubt."""
    lease, outcome = undo_sent(task_being_undone, "create-task")
    run = ended_meanwhile(task_being_undone)
    # What a rerun and a second compensation ended the same way leave on the row: another
    # undo, under another key, in doubt.
    Step.objects.filter(run=run, name="create-task").update(compensation_key="ck-rerun-2")

    transitions.record_outcome(lease, lease.work, outcome)
    row = step(run, "create-task")
    assert (row.status, row.error_message) == (StepStatus.COMPENSATION_FAILED,
                                               IN_FLIGHT_AT_END)
    assert records(run, "late_result_recorded") == []
    assert len(records(run, "late_result")) == 1
