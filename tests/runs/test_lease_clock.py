"""Leases are judged by the database server's clock: a worker and a sweeper whose clocks run
90 s ahead of it take no live lease from another worker and run nothing twice."""


import pytest

from audit.models import AuditRecord
from demo.sandbox.models import Customer, Message, PaymentUpdate
from runs.machine import transitions
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus, StepStatus
from tests.factories import SYSTEM, new_run
from tests.processes import manage, start_worker, stop, until_status

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("live_sandbox", "empty_broker")]
AHEAD = {"RUNS_TEST_CLOCK_OFFSET_SECONDS": 90}


def _sweep_from_a_process_ahead() -> str:
    process = manage("shell", "-c",
                     "from runs.execution import sweeper; print(sweeper.sweep().expired)",
                     **AHEAD)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out.strip().splitlines()[-1]


def test_a_sweeper_whose_clock_runs_ahead_takes_no_live_lease():
    held = new_run()
    lease = transitions.claim_run(held.pk, worker="live-worker")
    assert lease is not None and lease.work is not None

    assert _sweep_from_a_process_ahead() == "0"

    held.refresh_from_db()
    assert held.status == RunStatus.RUNNING and held.lease_owner == "live-worker"
    assert held.fencing_token == lease.token
    assert not AuditRecord.objects.filter(run=held, action="lease_expired").exists()
    assert transitions.heartbeat(lease)


def test_a_worker_whose_clock_runs_ahead_runs_each_step_once(tmp_path):
    held = new_run()
    live = transitions.claim_run(held.pk, worker="live-worker")
    run, _ = start_run(workflow="customer-onboarding", business_key="clock-ahead",
                       input={"email": "ann@example.com", "name": "Ann", "plan": "pro"},
                       actor=SYSTEM)
    ahead = start_worker("ahead", tmp_path, **AHEAD)
    try:
        sweeps = [_sweep_from_a_process_ahead() for _ in range(3)]
        run = until_status(run, RunStatus.COMPLETED)
    finally:
        stop(ahead)
    assert sweeps == ["0", "0", "0"]
    held.refresh_from_db()
    assert held.fencing_token == live.token and held.lease_owner == "live-worker"
    assert Customer.objects.count() == 1
    assert Message.objects.count() == 1
    assert PaymentUpdate.objects.count() == 1
    for s in run.steps.all():
        assert s.status == StepStatus.SUCCEEDED, s.name
    # Nobody took a lease back: no step ran twice because a clock said a lease had run out.
    assert not AuditRecord.objects.filter(
        action__in=["lease_expired", "step_lease_expired", "late_result"]).exists()
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPLETED
