"""Timers and event waits with real Celery workers SIGKILLed at the worst moment: right
after the wait ended, with the next step's intent recorded and its call not yet made, or
made and not yet recorded. After the lease expires another worker finishes the run: the run
slept once (or took its event once), and the write after the wait exists once."""

import pytest

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.bench_receiver import SlowReceiver
from runs.execution import sweeper
from runs.machine.transitions import start_run
from runs.models import RunStatus, StepStatus
from runs.waiting import events
from tests.factories import SYSTEM, step
from tests.processes import kill_hard, start_worker, stop, until_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.usefixtures("empty_broker")]
LEASE = 2
PAID = {"amount": 120, "reference": "PSP-77"}
POINTS = ["before_call", "after_call"]


@pytest.fixture
def receiver():
    with SlowReceiver(delay=0.0) as slow:
        yield slow


def _start(workflow, key, receiver):
    run, _ = start_run(workflow=workflow, business_key=key,
                       input={"n": 1, "url": receiver.url}, actor=SYSTEM)
    return run


def _killed_at(tmp_path, point):
    """A worker that dies at `point` of the step after the wait, swept meanwhile as beat
    would (a due timer is woken by the sweeper)."""
    marker = tmp_path / "crashed"
    doomed = start_worker("doomed", tmp_path, RUNS_LEASE_SECONDS=LEASE,
                          RUNS_CRASH_AT=f"{point}:send", RUNS_CRASH_MARKER=marker)
    try:
        def reached():
            sweeper.sweep()
            return marker.exists()

        wait_for(reached, timeout=60, interval=0.3, what=f"the worker to reach {point}:send")
    finally:
        kill_hard(doomed)
    assert doomed.returncode == -9


def _rescued(tmp_path, run):
    rescuer = start_worker("rescuer", tmp_path, RUNS_LEASE_SECONDS=LEASE)
    try:
        return until_status(run, RunStatus.COMPLETED)
    finally:
        stop(rescuer)


def _sent_once(run, receiver):
    sent = step(run, "send")
    assert sent.status == StepStatus.SUCCEEDED
    assert receiver.posts == {sent.idempotency_key: 1}
    assert list(receiver.effects) == [sent.idempotency_key]
    assert sent.remote_ref == receiver.effects[sent.idempotency_key]


def _records(run, action):
    return AuditRecord.objects.filter(run=run, action=action).count()


@pytest.mark.parametrize("point", POINTS)
def test_a_worker_killed_right_after_a_timer_woke_sends_once_and_never_sleeps_again(
        tmp_path, receiver, point):
    run = _start("test-nap-then-send", f"nap-{point}", receiver)
    _killed_at(tmp_path, point)
    assert step(run, "nap").status == StepStatus.SUCCEEDED
    assert step(run, "send").status == StepStatus.RUNNING  # its intent, left by the dead
    assert receiver.posts == ({} if point == "before_call" else {step(run, "send")
                                                                .idempotency_key: 1})
    run = _rescued(tmp_path, run)
    _sent_once(run, receiver)
    # One sleep, ended once: no second "sleeping until" after the rescue.
    assert _records(run, AuditAction.TIMER_STARTED) == 1
    assert AuditRecord.objects.filter(run=run, step_name="nap",
                                      after__step_status="succeeded").count() == 1


@pytest.mark.parametrize("point", POINTS)
def test_a_worker_killed_right_after_an_event_arrived_sends_once_and_takes_it_once(
        tmp_path, receiver, point):
    run = _start("test-event-then-send", f"pay-{point}", receiver)
    worker = start_worker("first", tmp_path, RUNS_LEASE_SECONDS=LEASE)
    try:
        until_status(run, RunStatus.WAITING)
    finally:
        stop(worker)
    assert step(run, "payment").status == StepStatus.WAITING

    def deliver():
        return events.receive_event(workflow="test-event-then-send", event="payment.settled",
                                    key=run.business_key, event_id="evt-1", source="psp",
                                    payload=PAID, actor=SYSTEM)

    assert deliver().status == "delivered"
    _killed_at(tmp_path, point)
    # The provider sends it again while the run is held by the dead worker's lease.
    assert deliver().status == "duplicate"
    run = _rescued(tmp_path, run)
    _sent_once(run, receiver)
    assert step(run, "payment").result == PAID
    assert _records(run, AuditAction.EVENT_RECEIVED) == 1
    assert deliver().status == "duplicate"
