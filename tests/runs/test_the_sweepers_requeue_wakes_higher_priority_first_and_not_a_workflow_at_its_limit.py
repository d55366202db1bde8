"""The sweeper's late pass sends hints for queued runs nobody picked up in the order a freed
slot does: higher priority first, the longest forgotten first within one, and none for a
limited workflow at its max_in_flight. Sent in the table's order, a backlog of a workflow at
its limit took every hint of the pass (its runs refused at the claim) while runs that could
start waited for later passes, and a low-priority backlog went before a high-priority run."""

from datetime import timedelta

import pytest

from runs import store
from runs.execution import sweeper
from runs.machine import limits, transitions
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def ranked_workflows():
    limits.limit_workflow("test-orders", priority=1)
    limits.limit_workflow("test-remote", max_in_flight=1, priority=9)
    limits.limit_workflow("test-two-systems", priority=5)
    yield
    for name in ("test-orders", "test-remote", "test-two-systems"):
        limits.forget(workflow=name)


def forgotten(*runs, minutes):
    """Queued runs whose hint was lost `minutes` ago."""
    Run.objects.filter(pk__in=[r.pk for r in runs]).update(
        updated_at=store.current().now() - timedelta(minutes=minutes))
    return [r.pk for r in runs]


def test_hints_go_out_by_priority_and_skip_the_workflow_at_its_limit(
        script, ranked_workflows, hints):
    low = forgotten(new_run(wake=False), new_run(wake=False), minutes=30)
    middle = forgotten(new_run("test-two-systems", wake=False), minutes=1)
    high_held = new_run("test-remote", wake=False)
    assert transitions.claim_run(high_held.pk, worker="w1") is not None
    at_its_limit = forgotten(*[new_run("test-remote", wake=False) for _ in range(3)],
                             minutes=60)

    report = sweeper.sweep(limit=2)

    assert hints == [middle[0], low[0]]
    assert report.requeued == 2
    assert not set(hints) & set(at_its_limit)


def test_once_the_slot_frees_the_higher_priority_backlog_goes_first(
        script, ranked_workflows, hints):
    low = forgotten(new_run(wake=False), minutes=30)
    high = forgotten(*[new_run("test-remote", wake=False) for _ in range(2)], minutes=5)

    sweeper.sweep(limit=3)

    assert hints == [*high, *low]
