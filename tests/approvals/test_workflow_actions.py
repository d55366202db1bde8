"""Pausing and resuming a workflow (its dispatch, or one of its schedules) is an action like
a run's: one function, approvals.operator_actions.act_on_workflow, checks the permission and
makes the change, and the console, the CLI and the API each call it in one line."""

import ast
import pathlib

import pytest
from django.contrib.auth.models import User
from guardian.shortcuts import assign_perm

from approvals.operator_actions import (
    WORKFLOW_ACTIONS,
    ActionForbidden,
    NoSuchAction,
    NoSuchWorkflow,
    act_on_workflow,
)
from audit.chain import Actor
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause, ScheduleState, Workflow
from tests.factories import new_run

pytestmark = pytest.mark.django_db

ROOT = pathlib.Path(__file__).resolve().parents[2]
# The functions that change a workflow's pause state, and the permission rule for them.
CHANGES = {"pause_dispatch", "resume_dispatch", "set_paused", "may_pause"}


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def test_a_person_without_the_permission_changes_nothing():
    clerk = User.objects.create_user("clerk")
    for action in WORKFLOW_ACTIONS:
        with pytest.raises(ActionForbidden, match="may not pause or resume test-scheduled"):
            act_on_workflow(action, "test-scheduled", schedule="every-minute", user=clerk,
                            reason="x")
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()
    assert not ScheduleState.objects.filter(paused=True).exists()


def test_the_permission_on_one_workflow_pauses_that_one_only():
    held = new_run()  # the workflow's row, which object permissions attach to
    finance = User.objects.create_user("fina")
    assign_perm(f"runs.{dispatch.PERMISSION}", finance, Workflow.objects.get(name="test-orders"))
    act_on_workflow("pause_dispatch", "test-orders", user=finance, reason="INC-7")
    with pytest.raises(ActionForbidden):
        act_on_workflow("pause_dispatch", "test-two-systems", user=finance, reason="INC-7")
    pause = DispatchPause.objects.get()
    assert (pause.workflow_name, pause.paused_by) == ("test-orders", "fina")
    # Resuming wakes the runs the pause held.
    assert act_on_workflow("resume_dispatch", "test-orders", user=finance, reason="ok") == 1
    assert held.workflow_name == "test-orders"
    assert list(ControlRecord.objects.order_by("id").values_list("action", "actor_user_id")) \
        == [("dispatch_paused", finance.pk), ("dispatch_resumed", finance.pk)]


def test_the_permission_is_checked_before_the_names():
    # An unknown action is the caller's mistake, not the person's: refused first.
    nobody = User.objects.create_user("nobody")
    with pytest.raises(NoSuchAction):
        act_on_workflow("delete_workflow", "test-orders", user=nobody, reason="x")
    # Whoever may not pause learns nothing of which workflows and schedules exist.
    for workflow, schedule in (("no-such-flow", ""), ("test-orders", ""),
                               ("test-scheduled", "never"), ("test-scheduled", "every-minute")):
        with pytest.raises(ActionForbidden):
            act_on_workflow("pause_schedule" if schedule else "pause_dispatch", workflow,
                            schedule=schedule, user=nobody, reason="x")
    boss = User.objects.create_superuser("boss")
    with pytest.raises(NoSuchWorkflow):
        act_on_workflow("pause_dispatch", "no-such-flow", user=boss, reason="x")
    with pytest.raises(NoSuchWorkflow):
        act_on_workflow("pause_schedule", "test-scheduled", schedule="never", user=boss,
                        reason="x")
    assert not DispatchPause.objects.exists() and not ControlRecord.objects.exists()


def test_a_token_acts_with_its_makers_permission_and_is_named_in_the_record():
    boss = User.objects.create_superuser("boss")
    act_on_workflow("pause_schedule", "test-scheduled", schedule="every-minute", user=boss,
                    reason="freeze", actor=Actor.system("api-token:ops"))
    state = ScheduleState.objects.get(name="every-minute")
    assert state.paused and state.paused_by == "api-token:ops"


def _names_used_in(path: pathlib.Path) -> set[str]:
    """The names a module refers to (called or not: `call = dispatch.pause_dispatch`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add(node.name)
    return names


def test_no_caller_checks_or_changes_a_pause_but_act_on_workflow():
    # The banner of a workflow's page asks may_pause only to offer the buttons.
    offering = {"console/world_views.py": {"may_pause"}}
    found = {str(p.relative_to(ROOT)): _names_used_in(p) & CHANGES
             for app in ("console", "api") for p in (ROOT / app).rglob("*.py")}
    assert {path: sorted(names) for path, names in found.items()
            if names - offering.get(path, set())} == {}
