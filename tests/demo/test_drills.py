"""The eight failure drills, on PostgreSQL, with real Celery workers (SIGKILLed where the
drill is a crash) calling the sandbox over real HTTP. Every drill ends by counting the
external objects and checking what must not have happened."""

from datetime import datetime

import pytest
from django.core.management import call_command
from django.utils import timezone

from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import Customer, LedgerEntry, Message, ModelCall, PaymentUpdate, Task
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.previews import compensation_preview
from runs.tasks import start_run as start_run_task
from tests.processes import kill_hard, until_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("sandbox_and_broker")]

APPROVER = Actor.system("drill-approver")


def _invoice(number="INV-1847"):
    run, _ = transitions.start_run(
        workflow="invoice-approval", business_key=f"tenant-42:{number}",
        input={"tenant": "tenant-42", "invoice_number": number,
               "approver_email": "approver@example.com"},
        actor=Actor.system("drill"))
    return run


def _until(run, *statuses, timeout=60):
    return until_status(run, *statuses, timeout=timeout)


def _until_approval(run, timeout=60):
    """Until the run waits for the approver (a retry backoff is waiting too, for a time)."""
    def reached():
        sweeper.sweep()
        return _step(run, "approve-invoice").status == StepStatus.WAITING

    wait_for(reached, timeout=timeout, interval=0.3, what=f"run {run.pk} to wait for approval")
    return Run.objects.get(pk=run.pk)


def _crash(worker, tmp_path, point):
    marker = tmp_path / f"crash-{point}"
    doomed = worker("doomed", RUNS_CRASH_AT=point, RUNS_CRASH_MARKER=marker)
    try:
        wait_for(marker.exists, timeout=60, what=f"the worker to reach {point}")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9


def _approve(run):
    transitions.decide_approval(run.pk, step_name="approve-invoice", approved=True,
                                actor=APPROVER, comment="drill")


def _step(run, name):
    return Step.objects.get(run=run, name=name)


def _actions(run, action):
    return list(AuditRecord.objects.filter(run=run, action=action).order_by("seq"))


def _assert_aftermath(*runs):
    """What must hold after every drill, whatever it did."""
    now = timezone.now()
    assert not Step.objects.filter(status=StepStatus.RUNNING, run__lease_expires_at__lt=now)\
        .exists(), "a step is running past its lease"
    for run in runs:
        for s in Step.objects.filter(run=run, status=StepStatus.SUCCEEDED,
                                     kind__in=["write", "notify"]):
            assert s.remote_ref, f"{s.name} succeeded without its remote reference"
    call_command("verify_audit")


def test_drill_1_crash_before_the_request_performs_the_action_once(worker, tmp_path):
    run = _invoice()
    _crash(worker, tmp_path, "before_call:create-approval-task")
    assert Task.objects.count() == 0
    worker("rescuer")
    run = _until_approval(run)
    assert Task.objects.count() == 1
    task = _step(run, "create-approval-task")
    assert task.attempt == 2 and task.remote_ref == Task.objects.get().ref
    _approve(run)
    _until(run, RunStatus.COMPLETED)
    assert (Task.objects.count(), Message.objects.count(), LedgerEntry.objects.count()) \
        == (1, 1, 1)
    _assert_aftermath(run)


def test_drill_2_crash_after_the_receiver_committed_reconciles_to_one_object(worker, tmp_path):
    run = _invoice()
    _crash(worker, tmp_path, "after_call:create-approval-task")
    assert Task.objects.count() == 1  # the tracker committed; the worker never recorded it
    worker("rescuer")
    run = _until_approval(run)
    task = _step(run, "create-approval-task")
    assert Task.objects.count() == 1 and task.remote_ref == Task.objects.get().ref
    assert task.attempt == 1  # found by key: never sent again
    assert _actions(run, "reconciled")[0].data["verdict"] == "found"
    _assert_aftermath(run)


def test_drill_2b_timeout_after_commit_is_unknown_and_reconciled_not_resent(worker):
    faults.add("tracker.create", faults.COMMIT_THEN_TIMEOUT)
    run = _invoice()
    worker()
    run = _until_approval(run)
    task = _step(run, "create-approval-task")
    assert Task.objects.count() == 1 and task.remote_ref == Task.objects.get().ref
    assert _actions(run, "outcome_unknown") and _actions(run, "reconciled")
    _assert_aftermath(run)


def test_drill_3_rate_limited_twice_then_success_backs_off_and_completes(worker):
    faults.add("tracker.create", faults.RATE_LIMIT, times=2)
    run = _invoice()
    worker()
    run = _until_approval(run)
    task = _step(run, "create-approval-task")
    assert task.attempt == 3 and Task.objects.count() == 1
    retries = _actions(run, "retry_scheduled")
    assert len(retries) == 2
    # Retry-After: 1 is honoured, and each wait is at least as long as the server asked.
    assert all(r.data["delay_seconds"] >= 1 for r in retries)
    # When each attempt started, from the one record that ended it.
    ended = [r for r in run.audit_records.filter(step_name="create-approval-task",
                                                 data__has_key="started_at").order_by("seq")]
    starts = [datetime.fromisoformat(r.data["started_at"]) for r in ended]
    gaps = [(b - a).total_seconds() for a, b in zip(starts, starts[1:], strict=False)]
    assert len(gaps) == 2 and all(gap >= 1 for gap in gaps)
    _approve(run)
    _until(run, RunStatus.COMPLETED)
    assert LedgerEntry.objects.count() == 1
    _assert_aftermath(run)


def test_drill_4_permanent_authorization_error_stops_without_spending_retries(worker):
    faults.add("tracker.create", faults.FORBIDDEN)
    run = _invoice()
    worker()
    run = _until(run, RunStatus.ATTENTION)
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    assert _step(run, "create-approval-task").attempt == 1
    # No retry of the refused call (a read before it may be retried when the sandbox is slow
    # to answer under a loaded machine: not what this drill is about).
    retries = [(r.step_name, r.data) for r in _actions(run, "retry_scheduled")]
    assert not [r for r in retries if r[0] == "create-approval-task"], retries
    assert Task.objects.count() == 0 and Message.objects.count() == 0
    # A terminated run does not come back by accident.
    transitions.terminate(run.pk, actor=APPROVER, reason="vendor blocked")
    with pytest.raises(TransitionNotAllowed):
        transitions.resume(run.pk, actor=APPROVER, reason="oops")
    assert executor.advance_run(run.pk) is None
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    _assert_aftermath(run)


def test_drill_5_restart_after_the_decision_reuses_it_without_asking_the_model(worker,
                                                                              tmp_path):
    run = _invoice()
    _crash(worker, tmp_path, "before_call:create-approval-task")
    assert ModelCall.objects.count() == 1
    decision = _step(run, "classify").result
    worker("rescuer")
    run = _until_approval(run)
    assert ModelCall.objects.count() == 1
    assert _step(run, "classify").result == decision and _step(run, "classify").attempt == 1
    assert Message.objects.count() == 1
    _assert_aftermath(run)


def test_drill_6_a_late_failure_compensates_newest_first_pausing_at_the_correction(worker):
    faults.add("ledger.post", faults.FORBIDDEN)
    run = _invoice()
    worker()
    run = _until_approval(run)
    _approve(run)
    # The newest undo is a correction to a person (high impact): prepared, not sent.
    run = _until(run, RunStatus.ATTENTION)
    assert run.attention_reason == AttentionReason.COMPENSATION_PAUSED
    assert run.current_step == "notify-approver"
    assert Message.objects.count() == 1  # only the approval request itself
    assert Task.objects.get().status != Task.CANCELLED  # nothing older undone either
    assert not run.steps.filter(compensation_attempt__gt=0).exists()  # no undo begun
    preview = compensation_preview(run, "notify-approver")
    assert preview["to"] == "approver@example.com" and "Disregard" in preview["subject"]

    ACTIONS["confirm_compensation"].perform(
        run.pk, actor=Actor.system("operator"),
        given=ActionInput(reason="checked the correction", step="notify-approver"))
    run = _until(run, RunStatus.COMPENSATED)
    undone = [r.step_name for r in _actions(run, "compensation_succeeded")]
    assert undone == ["notify-approver", "create-approval-task"]
    confirmed = _actions(run, "compensation_confirmed")
    assert len(confirmed) == 1 and confirmed[0].data["will_send"] == preview
    corrections = Message.objects.exclude(subject__startswith="Invoice")
    assert corrections.count() == 1 and corrections.get().subject == preview["subject"]
    task = Task.objects.get()
    assert task.status == Task.CANCELLED
    assert task.cancelled_at > corrections.get().created_at  # the task after the correction
    assert LedgerEntry.objects.count() == 0
    assert _step(run, "post-ledger-entry").status == StepStatus.FAILED
    _assert_aftermath(run)


def test_drill_7_a_failed_compensation_stays_visible_not_a_clean_rollback(worker):
    faults.add("ledger.post", faults.FORBIDDEN)
    faults.add("tracker.cancel", faults.FORBIDDEN)
    run = _invoice()
    worker()
    run = _until_approval(run)
    _approve(run)
    run = _until(run, RunStatus.ATTENTION)  # paused at the correction to the approver
    ACTIONS["confirm_compensation"].perform(
        run.pk, actor=Actor.system("operator"),
        given=ActionInput(reason="checked the correction", step="notify-approver"))
    run = _until(run, RunStatus.COMPENSATION_FAILED)
    assert run.attention_reason == AttentionReason.COMPENSATION_FAILED
    assert "create-approval-task" in run.status_message
    assert _step(run, "create-approval-task").status == StepStatus.COMPENSATION_FAILED
    assert Task.objects.get().status != Task.CANCELLED
    assert not _actions(run, "compensated")
    _assert_aftermath(run)


def test_drill_8_twenty_concurrent_deliveries_make_one_run_and_one_of_each_effect(worker):
    event = ("customer-onboarding", "tenant-7:cus-77",
             {"email": "grace@example.com", "name": "Grace Hopper", "plan": "pro"})
    for _ in range(24):
        start_run_task.apply_async(event)
    worker("a", **{})
    worker("b")
    wait_for(lambda: Run.objects.filter(business_key="tenant-7:cus-77").exists(), timeout=60,
             what="the run to start")
    run = _until(Run.objects.get(business_key="tenant-7:cus-77"), RunStatus.COMPLETED)
    assert Run.objects.count() == 1
    assert (Customer.objects.count(), Message.objects.count(), PaymentUpdate.objects.count()) \
        == (1, 1, 1)
    assert _actions(run, "started")[0].seq == 1 and len(_actions(run, "started")) == 1
    assert len(_actions(run, "claimed")) == 1
    _assert_aftermath(run)
