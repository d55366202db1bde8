"""The drill kit against a workflow that waits on the world before its write. A sleep ended
the crashing worker's advance short of the write ("the worker never reached the crash
point"), and the drill then slept it out for two minutes a drill and failed; now the drill
wakes the timer, as an operator may, and every drill reaches the write. An event wait the
drill cannot end (only the sender knows the payload) was spun on for two minutes a drill
and reported without naming it; now the drill's row says the run waits for that event."""

import pytest

from demo.sandbox.models import LedgerEntry
from runs.definitions.definition import registry
from runs.models import Run, RunStatus
from runs.operator.drills import run_drills

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _workflows_in_child_processes(settings, live_sandbox):
    import tests.drill_wait_workflows  # noqa: F401  (registers them here too)

    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES,
                                      "tests.drill_wait_workflows"]


def _rows(workflow: str) -> dict:
    return {row.drill.split(" (")[0]: row for row in run_drills(registry.latest(workflow))}


def test_a_drill_wakes_a_sleep_and_reaches_the_write_after_it():
    rows = _rows("test-drill-sleeps")

    for title in ("1 crash before the request", "2 crash after the call, before the outcome",
                  "8 same start event delivered 20x at once"):
        assert rows[title].passed, rows[title].observed
        assert "never reached" not in rows[title].observed
    drilled = Run.objects.filter(workflow_name="test-drill-sleeps", drill=True)
    assert set(drilled.values_list("status", flat=True)) == {RunStatus.COMPLETED}
    # One entry per drill run, never two: the woken run wrote once.
    assert LedgerEntry.objects.count() == drilled.count() == 3
    assert all(r.audit_records.filter(action="timer_woken").count() == 1 for r in drilled)


def test_a_drill_names_the_event_its_run_waits_for_and_writes_nothing():
    rows = _rows("test-drill-waits")

    for title in ("1 crash before the request", "2 crash after the call, before the outcome"):
        assert rows[title].passed is False
        assert "waits for the event payment.settled" in rows[title].observed
    assert "run waiting" in rows["8 same start event delivered 20x at once"].observed
    assert LedgerEntry.objects.count() == 0
    assert set(Run.objects.filter(workflow_name="test-drill-waits", drill=True)
               .values_list("status", flat=True)) == {RunStatus.WAITING}
