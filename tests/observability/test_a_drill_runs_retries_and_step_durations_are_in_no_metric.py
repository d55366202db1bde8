"""A drill breaks runs on purpose, so its runs are in no figure the alerts read: two drills
raised durable_lease_expiries_total by their five take-backs, and the step duration
histogram by their steps, for good. The records and steps of a drill run are counted in no
audit counter (at a scrape, nor by the recount of the history) and no step duration; those
of real work still are."""

from datetime import timedelta

import pytest

from audit.actions import AuditAction
from observability.metrics import audit_counts
from runs import store
from runs.execution import executor
from runs.machine.errors import TransientError
from runs.models import Run, Step
from tests.api.test_metrics import scrape, value
from tests.factories import new_run

pytestmark = pytest.mark.django_db

KINDS = ("read", "decision", "write")


def retried_to_completion(script, *, drill: bool) -> Run:
    """A run whose fetch failed once with a transient error, retried and completed (as the
    drill advances a drill run, as a worker any other)."""
    script.plan["fetch"] = [TransientError("503")]
    run = new_run(wake=False, drill=drill)
    worker = "drill" if drill else "w1"
    executor.advance_run(run.pk, worker=worker, drill=drill)
    past = store.current().now() - timedelta(seconds=1)
    Run.objects.filter(pk=run.pk).update(next_wake_at=past)
    Step.objects.filter(run=run, next_attempt_at__isnull=False).update(next_attempt_at=past)
    assert executor.advance_run(run.pk, worker=worker, drill=drill) == "completed"
    return run


def durations(samples) -> dict:
    return {kind: value(samples, "durable_step_duration_seconds_gcount",
                        workflow="test-orders", kind=kind) for kind in KINDS}


def test_a_drill_runs_retry_and_steps_are_counted_nowhere_real_works_are(client, script,
                                                                          settings):
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 0  # every scrape recounts the history
    before = scrape(client)

    retried_to_completion(script, drill=True)

    drilled = scrape(client)
    assert value(drilled, "durable_step_retries_total") == \
        value(before, "durable_step_retries_total")
    assert durations(drilled) == durations(before) == {kind: 0 for kind in KINDS}

    retried_to_completion(script, drill=False)

    real = scrape(client)
    assert value(real, "durable_step_retries_total") == \
        value(before, "durable_step_retries_total") + 1
    assert durations(real) == {"read": 1, "decision": 1, "write": 2}


def test_the_recount_of_the_history_leaves_a_drill_runs_records_out(script, settings):
    settings.METRICS_FINISHED_RECOUNT_SECONDS = 0
    retry = AuditAction.RETRY_SCHEDULED
    # Two minutes on, every record written now lies before the recount's mark: counted by
    # the recount, not by the scrape's count of what came after it.
    later = store.current().now() + timedelta(minutes=2)
    before = audit_counts.counts(later)[retry]

    retried_to_completion(script, drill=True)
    assert audit_counts.counts(later)[retry] == before

    retried_to_completion(script, drill=False)
    assert audit_counts.counts(later)[retry] == before + 1
