"""A long undo (a step's compensation) that calls ctx.heartbeat(), as the docs tell a long
step to, keeps its lease and its call deadline, as a long step does
(tests/runs/test_call_deadline.py). The heartbeat extended only a run whose status was
`running`, and a run being compensated is `compensating`: each beat was told its lease was
lost, and without heartbeats in the background (the solo and prefork default) the undo was
cut off at its deadline as an outcome unknown, and sent again, never to finish."""

import time

import pytest

from runs.definitions.definition import StepResult, registry
from runs.execution import executor
from runs.machine import transitions
from runs.models import Run, RunStatus, StepStatus
from tests.factories import SYSTEM, new_run, place, step

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def short_lease(settings):
    settings.RUNS_LEASE_SECONDS = 1.0  # a call deadline of 0.8 s
    settings.RUNS_HEARTBEAT_SECONDS = 0  # the solo / prefork default


def test_a_long_undo_that_heartbeats_keeps_its_lease_and_is_sent_once(script, monkeypatch):
    script.reset()
    run = place(new_run(wake=False), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED,
                               "classify": StepStatus.SUCCEEDED,
                               "create-task": StepStatus.SUCCEEDED})
    transitions.compensate(run.pk, actor=SYSTEM, reason="order withdrawn")
    spec = registry.get("test-orders", 1).step("create-task")
    beats, undos = [], []

    def long_undo(ctx):
        undos.append(ctx.key)
        for _ in range(4):
            time.sleep(0.4)
            beats.append(ctx.heartbeat())
        return StepResult({"undone": True}, remote_ref="undo-1")

    monkeypatch.setattr(spec, "compensate_fn", long_undo)
    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    # What a long step that heartbeats gets (tests/runs/test_call_deadline.py): every beat
    # True, the call not interrupted, the effect sent once.
    assert (run.status, step(run, "create-task").status, len(undos), beats) == (
        RunStatus.COMPENSATED, StepStatus.COMPENSATED, 1, [True, True, True, True]), \
        run.status_message
