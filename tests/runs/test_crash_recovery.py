"""Real Celery workers killed with SIGKILL at the worst moments. After the lease expires the
sweeper takes the run back, another worker finishes it, and every effect exists once."""

import pytest
from django.core.management import call_command

from audit.models import AuditRecord
from demo.sandbox.models import Customer, Message, PaymentUpdate
from runs.execution import sweeper
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, StepStatus
from tests.factories import SYSTEM, step
from tests.processes import kill_hard, start_worker, stop, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("live_sandbox", "empty_broker")]
LEASE = 2


def _start(key):
    run, _ = start_run(workflow="customer-onboarding", business_key=key,
                       input={"email": "ann@example.com", "name": "Ann", "plan": "pro"},
                       actor=SYSTEM)
    return run


def _crash_then_recover(tmp_path, point):
    marker = tmp_path / "crashed"
    run = _start(f"crash-{point}")
    doomed = start_worker("doomed", tmp_path, RUNS_LEASE_SECONDS=LEASE,
                          RUNS_CRASH_AT=f"{point}:create-customer", RUNS_CRASH_MARKER=marker)
    try:
        wait_for(marker.exists, timeout=60, what=f"the worker to reach {point}")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9
    held = step(run, "create-customer")
    assert held.status == StepStatus.RUNNING and held.attempt == 1

    rescuer = start_worker("rescuer", tmp_path, RUNS_LEASE_SECONDS=LEASE)
    try:
        def swept():
            sweeper.sweep()
            return Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED

        wait_for(swept, timeout=60, interval=0.5, what="the rescued run to complete")
    finally:
        stop(rescuer)
    return Run.objects.get(pk=run.pk)


def _assert_effects_once(run):
    assert Customer.objects.count() == 1
    assert Message.objects.count() == 1
    assert PaymentUpdate.objects.count() == 1
    assert not run.steps.filter(status=StepStatus.RUNNING).exists()
    for s in run.steps.all():
        assert s.status == StepStatus.SUCCEEDED and s.remote_ref, s.name
    # Each attempt's one record (its outcome, or its lease taken back) carries its key.
    keys = set(AuditRecord.objects.filter(run=run, step_name="create-customer",
                                          data__has_key="started_at")
               .values_list("data__key", flat=True))
    assert keys == {step(run, "create-customer").idempotency_key}
    call_command("verify_audit")


def test_killed_after_intent_before_the_call_the_step_is_sent_again_with_the_same_key(tmp_path):
    run = _crash_then_recover(tmp_path, "before_call")
    created = step(run, "create-customer")
    assert created.attempt == 2
    assert created.remote_ref == Customer.objects.get().ref
    actions = list(AuditRecord.objects.filter(run=run).values_list("action", flat=True))
    assert "lease_expired" in actions and "reconciled" in actions
    _assert_effects_once(run)


def test_killed_after_the_call_before_the_outcome_the_effect_is_reconciled_not_repeated(
        tmp_path):
    run = _crash_then_recover(tmp_path, "after_call")
    created = step(run, "create-customer")
    # Reconciliation found the customer: the step was never sent a second time.
    assert created.attempt == 1
    assert created.remote_ref == Customer.objects.get().ref
    reconciled = AuditRecord.objects.get(run=run, action="reconciled")
    assert reconciled.data["verdict"] == "found"
    _assert_effects_once(run)
