"""A dispatch pause made on a host whose clock runs ten minutes ahead is dated by the
database's clock: it is not in force "since" a time still to come, and the paused-since gauge
counts from when it was made. Its resume on a host ten minutes behind wakes the held runs
due by the database's clock, not only those due ten minutes earlier."""

from datetime import timedelta

import pytest

from observability.metrics import RuntimeCollector
from runs import store
from runs.models import ControlRecord, DispatchPause, RunStatus
from tests.factories import new_run, place
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

TEN_MINUTES = 600
SYSTEM_ACTOR = "from audit.chain import Actor; ops = Actor.system('ops'); "
PAUSE = (SYSTEM_ACTOR + "from runs.machine.dispatch import pause_dispatch; "
         "pause_dispatch(workflow='test-orders', actor=ops, reason='receiver down'); "
         "print('DONE')")
RESUME = (SYSTEM_ACTOR + "from runs.machine.dispatch import resume_dispatch; "
          "print('WOKEN', resume_dispatch(workflow='test-orders', actor=ops, "
          "reason='receiver back'))")


def _run_on_a_host_off_by(seconds: int, code: str) -> str:
    process = manage("shell", "-c", code, RUNS_TEST_CLOCK_OFFSET_SECONDS=seconds)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out.strip().splitlines()[-1]


def _paused_seconds() -> float:
    return next(s.value for family in RuntimeCollector().collect() for s in family.samples
                if s.name == "durable_dispatch_paused_seconds"
                and s.labels["workflow"] == "test-orders")


def test_a_pause_made_on_a_host_ahead_is_dated_by_the_database_clock():
    assert _run_on_a_host_off_by(TEN_MINUTES, PAUSE) == "DONE"
    now = store.current().now()
    pause = DispatchPause.objects.get(workflow_name="test-orders")
    assert pause.paused_at <= now
    assert ControlRecord.objects.get(action="dispatch_paused").created_at <= now
    assert 0 < _paused_seconds() < TEN_MINUTES


def test_a_resume_on_a_host_behind_wakes_the_held_run_due_by_the_database_clock():
    assert _run_on_a_host_off_by(0, PAUSE) == "DONE"
    place(new_run(wake=False), status=RunStatus.WAITING,
                next_wake_at=store.current().now() - timedelta(minutes=1))
    place(new_run(wake=False), status=RunStatus.WAITING,
          next_wake_at=store.current().now() + timedelta(minutes=5))
    assert _run_on_a_host_off_by(-TEN_MINUTES, RESUME) == "WOKEN 1"
    assert not DispatchPause.objects.exists()
