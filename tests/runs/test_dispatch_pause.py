"""Pausing a workflow's dispatch: starts accepted and kept queued, no new step starts,
steps in flight finish, the sweeper's wake-ups and retries hold, and resume carries on;
who and why are recorded."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from guardian.shortcuts import assign_perm

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.execution import executor, sweeper
from runs.machine import dispatch, transitions
from runs.machine.errors import TransientError
from runs.models import ControlRecord, Run, RunStatus, StepStatus, Workflow
from tests.factories import SYSTEM, new_run, step

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_pauses():
    dispatch.forget_cache()
    yield
    dispatch.forget_cache()


def pause(workflow="test-orders", system=""):
    dispatch.pause_dispatch(workflow=workflow, system=system, actor=SYSTEM,
                            reason="ledger incident INC-7")


def resume(workflow="test-orders", system=""):
    return dispatch.resume_dispatch(workflow=workflow, system=system, actor=SYSTEM,
                                    reason="incident over")


def test_starts_are_accepted_and_kept_queued_until_resumed(script):
    pause()
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") is None     # not claimed
    run.refresh_from_db()
    assert run.status == RunStatus.QUEUED and run.fencing_token == 0
    assert script.calls == []
    # The sweeper sends no wake-up for it however long it waits.
    report = sweeper.sweep(now=timezone.now() + timedelta(hours=1))
    assert report.requeued == 0
    resume()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls] == ["fetch", "classify", "create-task", "post-ledger"]


def test_a_step_in_flight_finishes_and_the_next_one_does_not_start(script):
    run = new_run()
    lease = transitions.claim_run(run.pk, worker="w1")
    assert lease.work.name == "fetch"            # its intent is recorded: it is in flight
    pause()
    lease = transitions.record_outcome(lease, lease.work,
                                       transitions.Outcome(succeeded=True, value={"x": 1}))
    assert lease.finished and lease.work is None
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.lease_owner == ""
    assert "dispatch paused by test: ledger incident INC-7" in run.status_message
    assert step(run, "fetch").status == StepStatus.SUCCEEDED
    assert step(run, "classify").status == StepStatus.PENDING and \
        step(run, "classify").attempt == 0
    held = AuditRecord.objects.get(run=run, action=AuditAction.DISPATCH_HELD)
    assert held.step_name == "classify"
    # Due, but neither a claim nor the sweeper moves it while paused.
    assert executor.advance_run(run.pk, worker="w2") is None
    assert sweeper.sweep(now=timezone.now() + timedelta(minutes=5)).due == 0
    assert resume() == 1                          # the held run is woken
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls] == ["classify", "create-task", "post-ledger"]


def test_a_retry_due_while_paused_holds_until_resumed(script):
    script.plan["fetch"] = [TransientError("503")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    pause()
    later = timezone.now() + timedelta(minutes=1)
    assert sweeper.sweep(now=later).due == 0
    assert transitions.claim_run(run.pk, worker="w1", now=later) is None
    resume()
    assert sweeper.sweep(now=later).due == 1
    assert transitions.claim_run(run.pk, worker="w1", now=later) is not None


def test_a_pause_towards_one_system_holds_only_the_steps_that_reach_it(script):
    pause("test-two-systems", system="tracker")
    run = new_run("test-two-systems")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert step(run, "to-ledger").status == StepStatus.SUCCEEDED
    assert step(run, "to-tracker").status == StepStatus.PENDING
    other = new_run()                              # another workflow is not held
    assert executor.advance_run(other.pk, worker="w1") == RunStatus.COMPLETED
    assert sweeper.sweep(now=timezone.now() + timedelta(minutes=1)).due == 0
    resume("test-two-systems", system="tracker")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED


def test_pause_and_resume_record_who_and_why_and_refuse_what_makes_no_sense():
    with pytest.raises(dispatch.DispatchError, match="reason is required"):
        dispatch.pause_dispatch(workflow="test-orders", actor=SYSTEM, reason="  ")
    with pytest.raises(dispatch.DispatchError, match="no step of test-orders reaches"):
        pause(system="mainframe")
    # The systems it has, each quoted: a name like "the ledger" is not read as prose.
    with pytest.raises(dispatch.DispatchError, match=r"its systems: 'ledger', 'tracker'$"):
        pause(workflow="test-two-systems", system="the ledger")
    with pytest.raises(dispatch.DispatchError, match="unknown workflow"):
        pause(workflow="nope")
    pause()
    with pytest.raises(dispatch.DispatchConflict, match="already paused"):
        pause()
    resume()
    with pytest.raises(dispatch.DispatchConflict, match="not paused"):
        resume()
    assert list(ControlRecord.objects.order_by("id").values_list(
        "action", "workflow_name", "actor_label", "reason")) == [
        ("dispatch_paused", "test-orders", "test", "ledger incident INC-7"),
        ("dispatch_resumed", "test-orders", "test", "incident over")]
    with pytest.raises(Exception, match="append-only"):
        ControlRecord.objects.all().delete()


def test_the_permission_is_the_one_rule_global_or_on_the_workflow_row():
    new_run()
    nobody = User.objects.create_user("nobody")
    finance = User.objects.create_user("fin")
    assign_perm("runs.pause_dispatch", finance, Workflow.objects.get(name="test-orders"))
    boss = User.objects.create_superuser("boss")
    assert not dispatch.may_pause(nobody, "test-orders")
    assert dispatch.may_pause(finance, "test-orders")
    assert not dispatch.may_pause(finance, "test-two-systems")
    assert dispatch.may_pause(boss, "test-two-systems")
    assert Run.objects.count() == 1


def test_a_timer_due_while_paused_holds_until_resumed(script):
    run = new_run("test-sleepy")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    pause("test-sleepy")
    later = timezone.now() + timedelta(hours=2)
    assert sweeper.sweep(now=later).due == 0
    assert transitions.claim_run(run.pk, worker="w1", now=later) is None
    resume("test-sleepy")
    assert sweeper.sweep(now=later).due == 1
