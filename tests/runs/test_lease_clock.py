"""Leases are judged by the database server's clock: a worker and a sweeper whose clocks run
90 s ahead of it take no live lease from another worker and run nothing twice. A claim, a
lease renewed with an outcome and a due time are stamped and judged in the writing
statement by the server's clock, so even a worker whose estimate of that clock is wrong
(its own clock stepped after it last measured the server's) gives itself no longer lease
and wakes nothing early."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection

from audit.models import AuditRecord
from demo.sandbox.models import Customer, Message, PaymentUpdate
from runs import store
from runs.machine import transitions
from runs.machine.errors import TransientError, classify
from runs.machine.transitions import start_run
from runs.machine.transitions.lease_cycle import holding
from runs.models import Run, RunStatus, StepStatus
from tests.factories import SYSTEM, new_run, place
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
        sweeps = []
        for _ in range(3):
            # The live worker beats as it would: a sweep process started under load can
            # take longer than a lease to boot, and an unbeaten lease does expire.
            assert transitions.heartbeat(live)
            sweeps.append(_sweep_from_a_process_ahead())
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


JUMP = timedelta(seconds=90)


@pytest.fixture
def estimate_ahead(monkeypatch):
    """This process's estimate of the database's clock is 90 s ahead of it (as after its
    own clock stepped forward between two measurements of the server's)."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + JUMP)


def _server_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _lease_of(run: Run) -> tuple:
    run.refresh_from_db()
    return run.lease_expires_at, run.heartbeat_at


@pytest.mark.usefixtures("estimate_ahead")
def test_a_claim_stamps_its_lease_by_the_database_clock():
    run = new_run()
    before = _server_now()
    assert transitions.claim_run(run.pk, worker="ahead") is not None
    expires, beat = _lease_of(run)
    lease = timedelta(seconds=settings.RUNS_LEASE_SECONDS)
    assert before <= beat <= _server_now()
    assert before + lease <= expires <= _server_now() + lease


@pytest.mark.usefixtures("estimate_ahead")
def test_a_waiting_run_is_not_claimed_before_its_time_by_the_database_clock():
    run = place(new_run(), status=RunStatus.WAITING,
                next_wake_at=_server_now() + timedelta(seconds=60))
    assert transitions.claim_run(run.pk, worker="ahead") is None
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.lease_owner == ""
    assert not AuditRecord.objects.filter(run=run, action="claimed").exists()


def _renewal_due(lease) -> None:
    # The lease is past its half: the next transition of its holder renews it.
    Run.objects.filter(pk=lease.run.pk).update(
        lease_expires_at=_server_now() + timedelta(seconds=1))
    lease.run.lease_expires_at = Run.objects.get(pk=lease.run.pk).lease_expires_at


def _record_success(lease):
    transitions.record_outcome(lease, lease.work,
                               transitions.Outcome(succeeded=True, value={"ok": 1}))


def _lease_holders_transition(lease):
    # What an agent's turns and tool calls, an undo or a lookup go through: the run locked,
    # the body's changes saved with the lease renewed.
    with holding(lease, "record_outcome") as change:
        assert change is not None


@pytest.mark.parametrize("transition", [_record_success, _lease_holders_transition],
                         ids=["one-statement", "locking"])
def test_a_lease_holders_transition_renews_the_lease_by_the_database_clock(transition,
                                                                           monkeypatch):
    run = new_run()
    lease = transitions.claim_run(run.pk, worker="ahead")
    _renewal_due(lease)
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + JUMP)
    before = _server_now()
    transition(lease)
    expires, beat = _lease_of(run)
    lease_length = timedelta(seconds=settings.RUNS_LEASE_SECONDS)
    assert run.lease_owner == "ahead" and run.fencing_token == lease.token
    assert before <= beat <= _server_now()
    assert before + lease_length <= expires <= _server_now() + lease_length


def test_an_outcome_recorded_under_the_lock_stamps_the_database_clock(monkeypatch):
    # A failure takes the locking path (the one statement records successes only): the
    # heartbeat it stamps is the server's time, not this process's estimate.
    run = new_run()
    lease = transitions.claim_run(run.pk, worker="ahead")
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + JUMP)
    before = _server_now()
    transitions.record_outcome(lease, lease.work, transitions.Outcome(
        succeeded=False, error=classify(TransientError("busy"))))
    _, beat = _lease_of(run)
    assert before <= beat <= _server_now()


def test_a_run_due_at_once_is_claimed_at_once_by_an_estimate_a_little_ahead(monkeypatch):
    """A transition that sends a run on at once (compensate, here) stamps its wake-up with
    this process's estimate of the database's clock; an estimate a moment ahead must not
    leave the claim its wake-up hint triggers finding the run not yet due."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now",
                        lambda db: measured(db) + timedelta(milliseconds=300))
    run = place(new_run(), status=RunStatus.ATTENTION,
                step_statuses={"create-task": StepStatus.SUCCEEDED})
    transitions.compensate(run.pk, actor=SYSTEM, reason="withdrawn")
    assert Run.objects.get(pk=run.pk).status == RunStatus.COMPENSATING
    assert transitions.claim_run(run.pk, worker="w1") is not None
