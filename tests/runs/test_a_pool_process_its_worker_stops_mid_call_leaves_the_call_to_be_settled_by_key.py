"""A pool process that Celery itself stops while a step is in its remote call (the hard time
limit, --time-limit; a stop sent to the worker's whole process group, as systemd's default
KillMode sends it) is a crash, not the step's failure. billiard turns the SIGTERM it gets
into a SystemExit raised inside the call; recorded as the call's own exit ("workflow code
exited its call"), it held the run for a person as an unexpected error. Now the process ends
with the intent in the row, its worker hands its lease back at once (the take-back, as when
the lease ends: runs.execution.lost_pool_process), the call is settled by key, and the run
completes, its effect made once (real prefork workers; the customer system keeps every
customer it creates)."""

import os
import signal

import pytest
from django.core.management import call_command

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
HOLD = 4  # the customer system takes this long to answer the first create
LEASE = 10


def _prefork_worker(tmp_path, name: str, *options: str, **env):
    return start_worker(name, tmp_path, pool="prefork", options=options,
                        RUNS_LEASE_SECONDS=LEASE, **env)


def _onboard(key: str) -> Run:
    return start_run(workflow="customer-onboarding", business_key=key,
                     input={"email": f"{key}@example.com", "name": key, "plan": "pro"},
                     actor=Actor.system("pool-stop-test"))[0]


def _create(run: Run) -> Step:
    return Step.objects.get(run=run, name="create-customer")


def _handed_back(run: Run) -> str:
    """Why the run's lease was handed back (its one take-back)."""
    return AuditRecord.objects.get(run_id=run.pk, action=AuditAction.LEASE_EXPIRED) \
        .data["handed_back"]


def _completed_once(run: Run) -> None:
    run = until_status(run, RunStatus.COMPLETED, RunStatus.ATTENTION, timeout=120)
    create = _create(run)
    assert run.status == RunStatus.COMPLETED, (run.attention_reason, create.error_message)
    # Taken back and settled by key (found, or sent again with its key when the call had
    # not reached the customer system): one customer.
    assert create.status == StepStatus.SUCCEEDED
    assert not any("exited its call" in str(data) for data in
                   AuditRecord.objects.filter(run_id=run.pk).values_list("data", flat=True))
    assert Customer.objects.count() == Message.objects.count() \
        == PaymentUpdate.objects.count() == 1
    call_command("verify_audit")


@pytest.fixture
def slow_create(settings, live_sandbox):
    settings.SANDBOX_HOLD_SECONDS = HOLD
    settings.EXTERNAL_TIMEOUT_SECONDS = HOLD + 10  # slow, not lost
    faults.add("customers.create", faults.SLOW)


def test_a_step_past_the_workers_hard_time_limit_is_settled_by_key_not_held_for_a_person(
        tmp_path, slow_create):
    # A hard limit the worker accepts is above the longest call the runtime lets run
    # (runs.machine.deadline.hard_limit_problem): here heartbeats keep a call's lease for
    # a second of it, and the limit cuts the create the customer system holds longer.
    worker = _prefork_worker(tmp_path, "limited", "--time-limit=2",
                             RUNS_HEARTBEAT_SECONDS=0.5, RUNS_CALL_LIMIT_SECONDS=1)
    try:
        run = _onboard("hard-limit")
        wait_for(lambda: "handed back at once" in (tmp_path / "limited.log").read_text(),
                 timeout=60, what="the hard time limit to stop the pool process")
        # Nothing recorded it as the call's failure: the worker took the lease of the process
        # it killed back, after the kill, and the call is settled by key.
        assert "hard time limit" in _handed_back(run)
        _completed_once(run)
    finally:
        stop(worker)


def test_a_step_in_flight_when_the_workers_process_group_is_stopped_is_settled_by_key(
        tmp_path, slow_create):
    worker = _prefork_worker(tmp_path, "stopped")
    try:
        run = _onboard("group-stop")
        wait_for(lambda: _create(run).status == StepStatus.RUNNING
                 and faults.pending_count() == 0, timeout=60, interval=0.05,
                 what="the create to be at the customer system")
        os.killpg(worker.pid, signal.SIGTERM)  # what systemd sends to every process
        worker.wait(timeout=30)
        # Handed back by the worker before it exited: the call is unknown, not failed, and
        # the run waits for the next worker, not for its lease to run out.
        assert _create(run).status == StepStatus.UNKNOWN
        assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED
        assert "its pool process died" in _handed_back(run)
    finally:
        stop(worker)
    replacement = start_worker("replacement", tmp_path, RUNS_LEASE_SECONDS=LEASE)
    try:
        _completed_once(run)
    finally:
        stop(replacement)
