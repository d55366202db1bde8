"""A prefork pool process SIGKILLed while its step is in its remote call (the OOM killer, an
operator) left the run held by its lease until the lease ran out, although the worker's main
process knows at once that its process died (Celery fails the task's request there and
requeues the message). The worker now hands back the dead process's lease at once, through
the take-back of a lease whose holder is gone: the run is taken up again long before its
lease would have run out, the step is settled by its key (found: the customer system saw
the create once), and the chain holds one take-back, naming the dead process and the worker
that handed its lease back (a real prefork worker; a lease of ten minutes)."""

import os
import signal
import socket

import pytest
from django.core.management import call_command
from django.db import connection

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import Customer, Message, PaymentUpdate
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, Step, StepStatus
from tests.processes import start_worker, stop, until_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 600  # what the run would wait for without the hand-back
HOLD = 20  # the customer system holds its answer this long, the create committed


@pytest.fixture
def held_create(settings, live_sandbox):
    settings.SANDBOX_HOLD_SECONDS = HOLD
    settings.EXTERNAL_TIMEOUT_SECONDS = HOLD + 30  # the call is in flight when it is killed
    faults.add("customers.create", faults.COMMIT_THEN_TIMEOUT)
    yield
    # The customer system's thread holds its answer on after the caller died: the test's
    # tables are emptied once no other session is in a transaction on them (a session left
    # idle, by this test or one before it, blocks nothing).
    wait_for(_no_other_transaction, timeout=HOLD + 30, interval=0.5,
             what="the customer system's held answer to end")


def _no_other_transaction() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                       "AND state IN ('active', 'idle in transaction', "
                       "'idle in transaction (aborted)')")
        return cursor.fetchone()[0] == 0


def _create(run: Run) -> Step:
    return Step.objects.get(run=run, name="create-customer")


def test_a_pool_process_killed_mid_call_has_its_lease_handed_back_and_its_step_found_by_key(
        tmp_path, held_create):
    worker = start_worker("pool", tmp_path, pool="prefork", RUNS_LEASE_SECONDS=LEASE)
    try:
        run = start_run(workflow="customer-onboarding", business_key="killed-child",
                        input={"email": "kc@example.com", "name": "Kc", "plan": "pro"},
                        actor=Actor.system("pool-kill-test"))[0]
        wait_for(lambda: Customer.objects.count() == 1
                 and _create(run).status == StepStatus.RUNNING,
                 timeout=60, interval=0.05, what="the create to be made, its answer held")
        held = Run.objects.get(pk=run.pk)
        assert held.status == RunStatus.RUNNING
        host, pid = held.lease_owner.rsplit(":", 1)
        assert host == socket.gethostname() and int(pid) != worker.pid  # a pool process
        os.kill(int(pid), signal.SIGKILL)
        # The sweeper of until_status takes back no live lease: only the hand-back frees it.
        run = until_status(run, RunStatus.COMPLETED, RunStatus.ATTENTION, timeout=90)
    finally:
        stop(worker)

    assert run.status == RunStatus.COMPLETED, run.status_message
    # Completed while the dead process's lease would still have held the run.
    assert run.finished_at < held.lease_expires_at
    create = _create(run)
    assert create.status == StepStatus.SUCCEEDED and create.attempt == 1  # never sent again
    assert create.remote_ref == Customer.objects.get().ref
    assert Customer.objects.count() == Message.objects.count() \
        == PaymentUpdate.objects.count() == 1

    records = AuditRecord.objects.filter(run_id=run.pk)
    take_back = records.get(action=AuditAction.LEASE_EXPIRED)
    assert take_back.data["previous_owner"] == held.lease_owner
    assert "its pool process died" in take_back.data["handed_back"]
    assert take_back.actor_label == f"{host}:{worker.pid}"  # the worker that saw it die
    assert records.filter(action=AuditAction.STEP_LEASE_EXPIRED).count() == 1
    reconciled = records.get(action=AuditAction.RECONCILED, step_name="create-customer")
    assert reconciled.data["verdict"] == "found"
    # Nothing twice: one claim before the death and one after (the requeued message and the
    # hint of the hand-back found the run claimed once), the create settled, not sent again.
    assert list(records.filter(step_name="create-customer").order_by("seq")
                .values_list("action", flat=True)) == [AuditAction.STEP_LEASE_EXPIRED,
                                                       AuditAction.RECONCILED]
    assert records.filter(action=AuditAction.CLAIMED).count() == 2
    assert records.filter(action=AuditAction.COMPLETED).count() == 1
    assert "handed back at once" in (tmp_path / "pool.log").read_text()
    call_command("verify_audit")
