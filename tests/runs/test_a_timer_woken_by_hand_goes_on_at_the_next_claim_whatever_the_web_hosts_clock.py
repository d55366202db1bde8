"""Wake timer: the run goes on at the next claim. The wake time is set "at once" as every
other go-on-now is (resends.due_at_once): by the web host's estimate of the database's
clock, a little in the past, so that a worker whose estimate is a few hundred milliseconds
behind does not find the woken timer not yet due and put the run back to sleep until the
sweeper's next pass."""

from datetime import timedelta

import pytest

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.machine import transitions
from runs.models import RunStatus, StepStatus
from runs.store import current
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")


def test_a_timer_woken_by_a_host_whose_clock_runs_ahead_goes_on_at_once(script):
    run = new_run("test-sleepy")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    ahead = current().now() + timedelta(milliseconds=500)
    transitions.wake_timer(run.pk, actor=OLGA, reason="customer called, go now", now=ahead)

    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
    assert step(run, "cool-off").status == StepStatus.SUCCEEDED
    assert [c[0] for c in script.calls] == ["look", "look-again"]
    # Not put back to sleep in between.
    assert AuditRecord.objects.filter(run=run, action=AuditAction.TIMER_STARTED).count() == 1
