"""The crash drills end by looking the step's effect up by its key, to compare what the
receiver holds with what the run recorded. A lookup that timed out on a loaded host was read
as "lookup by key finds nothing (LookupFailed(reason='lookup failed: ReadTimeout: timed
out'))" and failed a drill whose run had made its one effect. Now a lookup that fails is
asked again, the step's lookup_attempts times in all, as the runtime asks it; one that never
answers is said as failed and nothing checked, never as nothing found."""

import pytest

from demo.sandbox.models import LedgerEntry
from runs.definitions.definition import registry
from runs.models import Run
from runs.operator.drills import run_drills
from tests import drill_lookup_workflows

pytestmark = pytest.mark.django_db(transaction=True)

CRASHES = ("1 crash before the request", "2 crash after the call, before the outcome")


@pytest.fixture(autouse=True)
def _workflows_in_child_processes(settings, live_sandbox):
    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES,
                                      "tests.drill_lookup_workflows"]
    drill_lookup_workflows.asked_after_completion.clear()
    yield
    drill_lookup_workflows.TIMEOUTS_AFTER_COMPLETION["count"] = 0


def _rows() -> dict:
    return {row.drill.split(" (")[0]: row
            for row in run_drills(registry.latest("test-drill-lookup-times-out"))}


def test_a_lookup_that_times_out_once_is_asked_again_and_the_drill_passes():
    drill_lookup_workflows.TIMEOUTS_AFTER_COMPLETION["count"] = 1

    rows = _rows()

    for title in CRASHES:
        assert rows[title].passed, rows[title].observed
        assert "lookup" not in rows[title].observed
    crashed = Run.objects.filter(workflow_name="test-drill-lookup-times-out", drill=True,
                                 business_key__startswith="drill:crash-")
    # Each crash drill's run was looked up twice after it completed: the timeout, then the
    # answer; and it made its one ledger entry.
    assert {drill_lookup_workflows.asked_after_completion[r.pk] for r in crashed} == {2}
    assert LedgerEntry.objects.filter(
        transaction_ref__in=[r.steps.get().idempotency_key for r in crashed]).count() == 2


def test_a_lookup_that_never_answers_is_said_as_failed_not_as_nothing_found():
    drill_lookup_workflows.TIMEOUTS_AFTER_COMPLETION["count"] = 99

    rows = _rows()

    for title in CRASHES:
        observed = rows[title].observed
        assert rows[title].passed is False
        assert "lookup by key failed 3 times (lookup failed: ReadTimeout: timed out): " \
               "nothing checked, step recorded LE-" in observed, observed
        assert "finds nothing" not in observed
    crashed = Run.objects.filter(workflow_name="test-drill-lookup-times-out", drill=True,
                                 business_key__startswith="drill:crash-")
    assert {drill_lookup_workflows.asked_after_completion[r.pk] for r in crashed} == {3}
