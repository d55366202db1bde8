"""A pause towards a system that no step of the workflow reaches any more (a release renamed
or dropped it) is still shown, and can still be lifted: resuming it is not refused as a
system that does not exist, and a new pause towards such a system still is."""

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from approvals.operator_actions import NoSuchWorkflow, act_on_workflow
from runs.machine import dispatch
from runs.models import ControlRecord, DispatchPause

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def _left_by_an_older_release():
    # Paused when a step of test-orders still reached "fax"; the release since has none.
    DispatchPause.objects.create(workflow_name="test-orders", system="fax",
                                 reason="fax gateway down", paused_by="olga",
                                 paused_at=timezone.now())


def test_the_cli_lifts_a_pause_towards_a_system_no_step_reaches_now(operator, capsys):
    _left_by_an_older_release()
    call_command("dispatch", "status")
    assert "test-orders (fax): paused by olga" in capsys.readouterr().out
    call_command("dispatch", "resume", "test-orders", "--system", "fax", "--user", "olga",
                 "--reason", "fax retired")
    assert "test-orders for fax: resumed" in capsys.readouterr().out
    assert not DispatchPause.objects.exists()
    assert ControlRecord.objects.filter(action="dispatch_resumed", target="fax").count() == 1
    # Lifted once: the second resume is refused as one not in force, and records nothing.
    with pytest.raises(CommandError, match="no step of test-orders reaches a system 'fax'"):
        call_command("dispatch", "resume", "test-orders", "--system", "fax", "--user", "olga",
                     "--reason", "again")
    assert ControlRecord.objects.filter(action="dispatch_resumed").count() == 1


def test_a_new_pause_towards_such_a_system_is_still_refused(operator):
    with pytest.raises(CommandError, match="no step of test-orders reaches a system 'fax'"):
        call_command("dispatch", "pause", "test-orders", "--system", "fax", "--user", "olga",
                     "--reason", "x")
    assert not DispatchPause.objects.exists()
    assert not ControlRecord.objects.exists()


def test_a_pause_of_a_workflow_a_release_removed_can_still_be_lifted(admin_user):
    """Its workflow is no longer registered: resuming it is still an action on it, a new
    pause of it is refused as of no workflow."""
    DispatchPause.objects.create(workflow_name="retired-flow", system="",
                                 reason="vendor gone", paused_by="olga",
                                 paused_at=timezone.now())
    act_on_workflow("resume_dispatch", "retired-flow", user=admin_user, reason="retired")
    assert not DispatchPause.objects.filter(workflow_name="retired-flow").exists()
    assert ControlRecord.objects.filter(action="dispatch_resumed").count() == 1
    with pytest.raises(NoSuchWorkflow, match="no workflow 'retired-flow'"):
        act_on_workflow("pause_dispatch", "retired-flow", user=admin_user, reason="again")
    with pytest.raises(NoSuchWorkflow):
        act_on_workflow("resume_dispatch", "retired-flow", user=admin_user, reason="twice")
    assert ControlRecord.objects.filter(action="dispatch_resumed").count() == 1


def test_a_pause_towards_one_system_of_a_workflow_a_release_removed_can_still_be_lifted(
        admin_user):
    """The pause in force is the one towards that system: the workflow's check looks for
    it, not for a pause of the whole workflow, which there never was."""
    DispatchPause.objects.create(workflow_name="retired-flow", system="fax",
                                 reason="fax gateway down", paused_by="olga",
                                 paused_at=timezone.now())
    act_on_workflow("resume_dispatch", "retired-flow", system="fax", user=admin_user,
                    reason="retired")
    assert not DispatchPause.objects.exists()
    assert ControlRecord.objects.filter(action="dispatch_resumed", target="fax").count() == 1
