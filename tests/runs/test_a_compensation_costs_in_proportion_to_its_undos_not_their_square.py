"""A run's compensation works out its next undo without sorting every step for every undo:
advance_compensation asked undos_to_come, which built the whole plan (compensation_plan:
every step filtered and sorted) before each undo, so a compensation of 1,000 undos took
32 s, quadratic in the run's steps. Measured by the lines of the runtime's code executed
(runs/) while the undos are made: ten times the undos, about ten times the work. Not by
time."""

from datetime import timedelta

import pytest
from django.utils import timezone
from pydantic import BaseModel

from runs.definitions.definition import StepResult, Workflow
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from tests.factories import SYSTEM, new_run
from tests.line_counts import lines_of_runtime_code

pytestmark = pytest.mark.django_db



class UndoIn(BaseModel):
    order: str


def _undo(ctx):
    return StepResult({"undone": ctx.remote_ref}, remote_ref=f"undo-{ctx.step}")


def _writes(name: str, steps: int) -> Workflow:
    workflow = Workflow(name, version=1, input=UndoIn)
    for position in range(steps):
        write = workflow.write(f"w{position}", honours_key=True)(
            lambda ctx: StepResult({"ok": True}, remote_ref=f"ref-{ctx.step}"))
        write.compensate(_undo)
    return workflow


SHORT, LONG = _writes("test-undo-short", 30), _writes("test-undo-long", 300)


def _compensation_lines(workflow: Workflow, steps: int) -> int:
    # Every step done (one after the other), the run in attention; a person compensates it.
    run = new_run(workflow.name, wake=False)
    start = timezone.now() - timedelta(hours=1)
    for step in Step.objects.filter(run=run):
        Step.objects.filter(pk=step.pk).update(
            status=StepStatus.SUCCEEDED, result={"ok": True}, remote_ref=f"ref-{step.name}",
            finished_at=start + timedelta(seconds=step.position))
    Run.objects.filter(pk=run.pk).update(
        status=RunStatus.ATTENTION, attention_reason=AttentionReason.PERMANENT_ERROR,
        steps_done=steps, current_step=f"w{steps - 1}")
    transitions.compensate(run.pk, actor=SYSTEM, reason="undo it all")

    def undo_all():
        for _ in range(5):
            if executor.advance_run(run.pk, worker="w1") != RunStatus.QUEUED:
                break

    _, lines = lines_of_runtime_code(undo_all)
    run.refresh_from_db()
    assert run.status == RunStatus.COMPENSATED, (run.status, run.status_message)
    assert Step.objects.filter(run=run, status=StepStatus.COMPENSATED).count() == steps
    return lines


def test_ten_times_the_undos_cost_about_ten_times_the_work():
    short, long = _compensation_lines(SHORT, 30), _compensation_lines(LONG, 300)
    # Linear: 24,012 lines against 230,027 (9.6 times). It was 26 times (29,589 against
    # 771,821) while each undo built the whole plan again.
    assert long < 15 * short, (short, long)
