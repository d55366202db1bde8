"""When a run of a limited workflow lets go of its slot, the queued runs woken next are the
highest-priority ones that can be admitted now. A higher-priority workflow that is at its own
limit has nothing to gain from the freed slot: waking its runs instead would leave the
lower-priority workflow's queued runs to the sweeper's late pass, one run per requeue period
however fast its runs are."""

import pytest

from audit.chain import Actor
from runs.machine import limits, transitions
from runs.models import RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db

OPERATOR = Actor.system("test")


@pytest.fixture
def two_limited_workflows():
    limits.limit_workflow("test-orders", max_in_flight=1, priority=1)
    limits.limit_workflow("test-remote", max_in_flight=1, priority=9)
    yield
    limits.forget(workflow="test-orders")
    limits.forget(workflow="test-remote")


def test_a_slot_freed_in_a_low_priority_workflow_wakes_its_own_queued_run(
        script, two_limited_workflows):
    low_held = new_run(wake=False)
    high_held = new_run("test-remote", wake=False)
    assert transitions.claim_run(low_held.pk, worker="w1") is not None
    assert transitions.claim_run(high_held.pk, worker="w2") is not None
    low_queued = new_run(wake=False).pk
    high_queued = [new_run("test-remote", wake=False).pk for _ in range(3)]

    transitions.terminate(low_held.pk, actor=OPERATOR, reason="probe: its slot frees")
    low_held.refresh_from_db()
    assert low_held.status == RunStatus.TERMINATED

    woken = limits.queued_by_priority(2)
    assert woken == [low_queued]
    assert not set(woken) & set(high_queued)
    # ... and it is admitted, where the higher-priority ones are not.
    assert transitions.claim_run(high_queued[0], worker="w3") is None
    assert transitions.claim_run(low_queued, worker="w3") is not None


def test_with_room_in_both_the_higher_priority_workflow_still_goes_first(
        script, two_limited_workflows):
    low = [new_run(wake=False).pk for _ in range(2)]
    high = new_run("test-remote", wake=False).pk
    assert limits.queued_by_priority(3) == [high, *low]
