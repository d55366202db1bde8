"""A worker is killed (SIGKILL, a real Celery worker) after it recorded the intent of an undo
and before its outcome: the sweeper takes the lease back, which leaves the undo compensating
with nobody holding it. That undo was sent as far as anyone knows, and never answered
(in_flight.undo_unanswered): its outcome is unknown, it may have been undone, wherever its
compensation stops next with nothing to carry it on. A person ends the run: it is in doubt
until its late answer (ended_in_doubt). A release removed its undo, and the next worker
holds the compensation there (compensation.hold_undo_missing): it is in doubt (unknown),
not a failed undo. Either way it is not given an error it never met (its step's own, from
the call whose failure started the compensation), and the four-eyes list says it may have
been undone. Compensated again, it is sent again with its key, once."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from runs.agents import agent_loop
from runs.definitions.definition import registry
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import AttentionReason, ErrorClass, RunStatus, StepStatus, ToolCall, ToolCallStatus
from tests.factories import SYSTEM, new_run, place, step
from tests.processes import kill_hard, start_worker, stop, wait_for
from tests.workflows import note_then_charge, start_saga

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("empty_broker")]
SECOND = Actor.system("second")
IN_DOUBT = ("compensation_failed", ErrorClass.ENDED_IN_DOUBT,
            "in flight when the run was terminated")
HELD_IN_DOUBT = ("compensation_failed", ErrorClass.UNKNOWN,
                 "its undo was sent and never answered: it may have been undone")


def state(row) -> tuple:
    row.refresh_from_db()
    return row.status, row.error_class, row.error_message


def killed_sending_the_undo(tmp_path, point: str) -> None:
    """A worker claims the run being compensated, records the intent of the undo at `point`
    and is killed there; its lease runs out and the sweeper takes it back."""
    marker = tmp_path / "reached"
    doomed = start_worker("doomed", tmp_path, RUNS_LEASE_SECONDS=1,
                          RUNS_CRASH_AT=f"before_call:{point}", RUNS_CRASH_MARKER=marker)
    try:
        wait_for(marker.exists, timeout=60, what=f"the worker to reach {point}")
    finally:
        kill_hard(doomed)
        stop(doomed)
    assert doomed.returncode == -9
    wait_for(lambda: sweeper.sweep().expired == 1, timeout=30, interval=0.3,
             what="the dead worker's lease to be taken back")


def undos_sent(script, name: str) -> list[str]:
    return [call[1] for call in script.calls if call[0] == f"{name}:compensate"]


def confirmed_note_undo_its_worker_died_sending(tmp_path, monkeypatch, key: str):
    """The note is high impact (written without asking anyone): the compensation the
    failed charge started pauses before its undo, and a person confirms it; the worker
    that sends it is killed. Returns the run, the note, its tool, and the charge's error."""
    monkeypatch.setattr(agent_loop, "ask_model", note_then_charge())
    tool = registry.get("test-agent-saga", 1).step("assist").tools["write-note"]
    monkeypatch.setattr(tool, "impact", "high")
    monkeypatch.setattr(tool, "approve_if", lambda args: False)
    run = start_saga(key)
    executor.advance_run(run.pk, worker="in-test")
    note = ToolCall.objects.get(step__run=run, tool="write-note")
    transitions.confirm_compensation(run.pk, step_name="assist", call_ref=note.ref,
                                     actor=SYSTEM, reason="the note is wrong")
    killed_sending_the_undo(tmp_path, "assist/write-note:compensate")
    return run, note, tool, step(run, "assist").error_message


def task_undo_its_worker_died_sending(tmp_path):
    """A run whose task was created, compensated by a person; the worker that sends the
    task's undo is killed."""
    run = place(new_run(wake=False), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED,
                               "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.SUCCEEDED})
    transitions.compensate(run.pk, actor=SYSTEM, reason="order withdrawn")
    killed_sending_the_undo(tmp_path, "create-task:compensate")
    return run


def held_at_the_lost_undo(run):
    executor.advance_run(run.pk, worker="in-test")
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.COMPENSATION_FAILED,
                                                  AttentionReason.DEFINITION_MISSING)
    return run


def test_a_tool_calls_undo_its_worker_died_sending_is_in_doubt_not_given_its_steps_error(
        tmp_path, script, monkeypatch):
    run, note, _, charge_error = confirmed_note_undo_its_worker_died_sending(
        tmp_path, monkeypatch, "killed-undo")
    assert "card declined" in charge_error  # what started the compensation
    note.refresh_from_db()
    assert (note.status, note.compensation_attempt) == (ToolCallStatus.COMPENSATING, 1)
    assert step(run, "assist").lease_owner == ""  # taken back

    run = transitions.terminate(run.pk, actor=SYSTEM, reason="guest left",
                                approved_by=SECOND)
    assert run.status == RunStatus.TERMINATED
    assert state(note) == IN_DOUBT
    assert charge_error not in note.error_message
    assert [str(e) for e in transitions.high_impact_effects(
        list(run.steps.order_by("position")))] == [
        f"assist: tool call {note.ref} write-note: undo outcome unknown: may have been undone"]
    assist = step(run, "assist")
    assert (assist.status, assist.error_class, assist.error_message) == IN_DOUBT
    ended = AuditRecord.objects.get(run=run, action="terminated")
    assert ended.data["undos_left"] == {
        f"assist: tool call {note.ref} write-note": ToolCallStatus.COMPENSATION_FAILED,
        "assist": StepStatus.COMPENSATION_FAILED}
    assert not AuditRecord.objects.filter(
        run=run, action__in=("tool_call_compensated", "late_result_recorded")).exists()

    transitions.reopen(run.pk, actor=SYSTEM, reason="undo it after all")
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo it after all",
                           approved_by=SECOND)
    executor.advance_run(run.pk, worker="in-test")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATED, run.status_message
    assert state(note) == (ToolCallStatus.COMPENSATED, "", "")
    # The killed worker never called the receiver (it died before the call): one undo.
    assert undos_sent(script, "write-note") == [note.compensation_key]


def test_a_steps_undo_its_worker_died_sending_is_in_doubt(tmp_path, script):
    run = task_undo_its_worker_died_sending(tmp_path)
    task = step(run, "create-task")
    assert (task.status, task.compensation_attempt, task.lease_owner) == (
        StepStatus.COMPENSATING, 1, "")

    run = transitions.terminate(run.pk, actor=SYSTEM, reason="order void")
    assert run.status == RunStatus.TERMINATED
    assert state(task) == IN_DOUBT
    ended = AuditRecord.objects.get(run=run, action="terminated")
    assert ended.data["undos_left"] == {"create-task": StepStatus.COMPENSATION_FAILED}

    transitions.reopen(run.pk, actor=SYSTEM, reason="undo it after all")
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo it after all")
    executor.advance_run(run.pk, worker="in-test")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATED, run.status_message
    assert undos_sent(script, "create-task") == [task.compensation_key]


def test_a_tool_calls_undo_its_worker_died_sending_is_in_doubt_where_a_release_removed_it(
        tmp_path, script, monkeypatch):
    run, note, tool, charge_error = confirmed_note_undo_its_worker_died_sending(
        tmp_path, monkeypatch, "killed-undo-held")
    delete_note = tool.compensate_fn
    monkeypatch.setattr(tool, "compensate_fn", None)  # a release removed the note's undo

    run = held_at_the_lost_undo(run)
    assert state(note) == HELD_IN_DOUBT
    assert charge_error not in note.error_message
    assert (step(run, "assist").status, step(run, "assist").error_class) == (
        StepStatus.COMPENSATION_FAILED, ErrorClass.UNKNOWN)
    assert [str(e) for e in transitions.high_impact_effects(
        list(run.steps.order_by("position")))] == [
        f"assist: tool call {note.ref} write-note: undo outcome unknown: may have been undone"]
    held = AuditRecord.objects.get(run=run, action="definition_missing")
    assert held.data["tool_calls"] == {note.ref: ToolCallStatus.COMPENSATION_FAILED}
    assert undos_sent(script, "write-note") == []  # nothing was sent while it held

    monkeypatch.setattr(tool, "compensate_fn", delete_note)  # the undo is back
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo restored", approved_by=SECOND)
    executor.advance_run(run.pk, worker="in-test")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATED, run.status_message
    assert state(note) == (ToolCallStatus.COMPENSATED, "", "")
    assert undos_sent(script, "write-note") == [note.compensation_key]


def test_a_steps_undo_its_worker_died_sending_is_in_doubt_where_a_release_removed_it(
        tmp_path, script, monkeypatch):
    run = task_undo_its_worker_died_sending(tmp_path)
    spec = registry.get("test-orders", 1).step("create-task")
    undo = spec.compensate_fn
    monkeypatch.setattr(spec, "compensate_fn", None)

    run = held_at_the_lost_undo(run)
    task = step(run, "create-task")
    assert state(task) == HELD_IN_DOUBT
    assert (task.next_attempt_at, task.lease_owner) == (None, "")

    monkeypatch.setattr(spec, "compensate_fn", undo)
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo restored")
    executor.advance_run(run.pk, worker="in-test")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATED, run.status_message
    assert undos_sent(script, "create-task") == [task.compensation_key]
