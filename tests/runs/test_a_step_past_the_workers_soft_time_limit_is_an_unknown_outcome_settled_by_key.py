"""A worker started with --soft-time-limit raises SoftTimeLimitExceeded wherever its task
is when the limit passes: in a step's remote call, the call may have acted, as when the
runtime's own deadline interrupts it. It was classified as an unexpected error and held the
run for a person ("fix the code, then retry"); now it is an unknown outcome, settled by key
at once, and the run completes with its effect made once (a real prefork worker; the
customer system keeps every customer it creates)."""

import pytest
from django.core.management import call_command

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import Customer, PaymentUpdate
from runs.machine.transitions import start_run
from runs.models import RunStatus, Step, StepStatus
from tests.processes import start_worker, stop, until_status

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
HOLD = 4  # the customer system takes this long to answer the first create


def test_a_call_the_soft_time_limit_interrupts_is_settled_by_key(tmp_path, settings,
                                                                 live_sandbox):
    settings.SANDBOX_HOLD_SECONDS = HOLD
    settings.EXTERNAL_TIMEOUT_SECONDS = HOLD + 10  # slow, not lost
    faults.add("customers.create", faults.SLOW)
    worker = start_worker("soft", tmp_path, pool="prefork", options=("--soft-time-limit=2",),
                          RUNS_LEASE_SECONDS=30)
    try:
        run = start_run(workflow="customer-onboarding", business_key="soft-limit",
                        input={"email": "soft@example.com", "name": "Soft", "plan": "pro"},
                        actor=Actor.system("soft-limit-test"))[0]
        run = until_status(run, RunStatus.COMPLETED, RunStatus.ATTENTION, timeout=90)
    finally:
        stop(worker)
    assert "Soft time limit" in (tmp_path / "soft.log").read_text()
    create = Step.objects.get(run=run, name="create-customer")
    assert run.status == RunStatus.COMPLETED, (run.attention_reason, create.error_message)
    assert create.status == StepStatus.SUCCEEDED
    unknown = AuditRecord.objects.get(run_id=run.pk, action=AuditAction.OUTCOME_UNKNOWN)
    assert "soft time limit" in unknown.data["error"]
    assert Customer.objects.count() == PaymentUpdate.objects.count() == 1
    call_command("verify_audit")
