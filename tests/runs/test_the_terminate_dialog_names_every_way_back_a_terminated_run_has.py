"""Terminate's dialog says how a terminated run comes back, and names every action the
transition table lets a terminated run take, each by the label its button carries: it said
"only through Reopen" while Re-run from step was offered on the terminated run too."""

import pytest

from runs.machine.transitions.kernel import allowed
from runs.models import RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput, offered
from tests.factories import SYSTEM, new_run, place

pytestmark = pytest.mark.django_db

WAYS_BACK = [name for name in ACTIONS if allowed(name, RunStatus.TERMINATED)]


def test_every_action_a_terminated_run_accepts_is_named_by_terminate():
    assert sorted(WAYS_BACK) == ["reopen", "rerun_from_step"]
    summary = ACTIONS["terminate"].summary
    assert "only through Reopen." not in summary
    for name in WAYS_BACK:
        assert ACTIONS[name].label in summary, name


def test_a_terminated_run_is_offered_each_and_nothing_else():
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"fetch": StepStatus.SUCCEEDED, "classify": StepStatus.FAILED})
    ACTIONS["terminate"].perform(run.pk, actor=SYSTEM,
                                 given=ActionInput(reason="stop"))
    run.refresh_from_db()
    assert run.status == RunStatus.TERMINATED
    steps = list(run.steps.order_by("position"))
    assert {a.name for a in offered(run, steps)} == set(WAYS_BACK)


