"""A run a person ends (cancel, terminate) while it sleeps keeps no timer: its sleep step is
skipped as the steps it never reached are, its wake time is gone from the step and the run,
and when that time comes the sweeper finds nothing due, a stray wake-up claims nothing, no
step runs and the run stays terminated. Reopened and resumed, it sleeps anew. (Its event
wait, by contrast, it keeps: an event arriving for an ended run is refused for it by that
wait, runs.waiting.kept.)"""

from datetime import timedelta

import pytest

from audit.chain import Actor
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def end(action: str, run) -> None:
    ACTIONS[action].perform(run.pk, actor=OLGA, given=ActionInput(reason="order withdrawn"))


@pytest.mark.parametrize("action", ["cancel", "terminate"])
def test_an_ended_sleeping_run_keeps_no_wake_time_and_nothing_wakes_it(script, action):
    run = new_run("test-sleepy")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    wake_at = step(run, "cool-off").next_attempt_at
    assert step(run, "cool-off").status == StepStatus.WAITING and wake_at is not None

    end(action, run)

    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED and run.next_wake_at is None
    timer = step(run, "cool-off")
    assert timer.status == StepStatus.SKIPPED and timer.next_attempt_at is None
    assert step(run, "look-again").status == StepStatus.SKIPPED
    assert transitions.sleeping_step(list(run.steps.all())) is None

    # Its old wake time comes: nothing is due, a stray wake-up (or a worker's claim at that
    # time) takes nothing, and no step runs.
    later = wake_at + timedelta(minutes=1)
    assert sweeper.sweep(now=later).due == 0
    assert transitions.claim_run(run.pk, worker="w2", now=later) is None
    assert executor.advance_run(run.pk, worker="w2") is None
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    assert [call[0] for call in script.calls] == ["look"]


def test_a_reopened_run_sleeps_anew_from_its_resume(script):
    run = new_run("test-sleepy")
    executor.advance_run(run.pk, worker="w1")
    end("terminate", run)
    ACTIONS["reopen"].perform(run.pk, actor=OLGA, given=ActionInput(reason="by mistake"))
    ACTIONS["resume"].perform(run.pk, actor=OLGA, given=ActionInput(reason="go on"))
    resumed = Run.objects.get(pk=run.pk).updated_at

    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    timer = step(run, "cool-off")
    assert timer.status == StepStatus.WAITING
    assert timer.next_attempt_at >= resumed + timedelta(hours=1)
    assert Run.objects.get(pk=run.pk).next_wake_at == timer.next_attempt_at
    assert [call[0] for call in script.calls] == ["look"]
