"""Workflow code that exits (a library's sys.exit(), a GeneratorExit let out of a
generator) ends its call, not the worker: the call is recorded as an unclassified failure,
for a person, once. A person's interrupt (KeyboardInterrupt) still stops the process, whose
run is then taken back as after any crash."""

import dataclasses

import pytest

from runs.agents import agent_loop
from runs.execution import executor
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.processes import start_worker, stop, wait_for
from tests.workflows import NoteArgs, assist, orders

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("exit_", [SystemExit(3), SystemExit("parser gave up"), GeneratorExit()],
                         ids=["exit-code", "exit-message", "generator-exit"])
def test_a_read_step_that_exits_fails_once_for_a_person(script, exit_):
    script.reset()
    run = new_run()
    script.plan["fetch"] = [exit_]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    fetch = step(run, "fetch")
    assert run.attention_reason == AttentionReason.UNCLASSIFIED_ERROR
    assert fetch.status == StepStatus.FAILED and fetch.error_class == ErrorClass.UNCLASSIFIED
    assert fetch.error_message.startswith(type(exit_).__name__)
    assert "workflow code exited its call" in fetch.error_message
    assert [call[0] for call in script.calls] == ["fetch"]
    assert run.lease_owner == ""


def test_a_write_step_that_exits_after_sending_is_not_sent_again(script):
    script.reset()
    run = new_run()
    script.plan["create-task"] = [SystemExit(1)]
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run.refresh_from_db()
    task = step(run, "create-task")
    # It may have acted before it exited: unknown, for a person, never sent again.
    assert task.status == StepStatus.UNKNOWN and task.error_class == ErrorClass.UNCLASSIFIED
    assert [call[0] for call in script.calls] == ["fetch", "classify", "create-task"]
    assert step(run, "post-ledger").attempt == 0


def test_a_persons_interrupt_stops_the_process_and_leaves_the_intent(script):
    script.reset()
    run = new_run()
    script.plan["fetch"] = [KeyboardInterrupt()]
    with pytest.raises(KeyboardInterrupt):
        executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    # Nothing recorded as the call's outcome: the lease runs out and the run is taken back.
    assert step(run, "fetch").status == StepStatus.RUNNING
    assert run.lease_owner == "w1"


def test_a_tool_that_exits_fails_unclassified():
    tool = dataclasses.replace(assist.tools["write-note"], fn=lambda ctx, args: exit(4))
    outcome = agent_loop.call_tool(tool, None, NoteArgs(text="x"))
    assert not outcome.succeeded and outcome.error.error_class == ErrorClass.UNCLASSIFIED
    assert outcome.error.message.startswith("SystemExit: 4")


def test_an_undo_that_exits_fails_unclassified():
    def undo(ctx):
        raise SystemExit(5)

    spec = dataclasses.replace(orders.step("create-task"), compensate_fn=undo)
    outcome = executor.call_compensation(spec, None)
    assert not outcome.succeeded and outcome.error.error_class == ErrorClass.UNCLASSIFIED
    assert outcome.error.message.startswith("SystemExit: 5")


@pytest.mark.usefixtures("empty_broker")
def test_step_code_that_exits_in_a_real_worker_leaves_the_worker_running(tmp_path):
    worker = start_worker("exits", tmp_path)
    try:
        run = new_run("test-exits")
        wait_for(lambda: Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION,
                 timeout=60, what="the run to wait for a person")
        assert worker.poll() is None, "the worker process ended with the step's exit"
    finally:
        stop(worker)
    run = Run.objects.get(pk=run.pk)
    parse = step(run, "parse")
    assert parse.status == StepStatus.FAILED and parse.attempt == 1
    assert parse.error_message.startswith("SystemExit: 3")
    assert step(run, "notify").attempt == 0
