"""The drill kit against workflows that wait on the world before their writes. The crashing
worker's advance ends at a wait, short of the write it is to die at: the drill carries the run
through, as the drill, by the transitions a person would use (a timer woken, an approval
approved through its request, an event delivered with the default its wait declares, as its
timeout would), recorded in the run's chain, and starts the worker again. Every drill then
reaches the write behind the wait, and the write is made once. Before, an approval or an event
before the write failed drills 1 and 2 ("the worker never reached the crash point"), and an
event wait failed 5, 8 and 6 too.

An event whose wait declares no default is not made up: the drills behind it are not
exercised, saying why. Before, the drill skipped the event, and a write reading its payload
crashed ("post: KeyError: 'paid'"): drills 1, 2 and 8 failed a correct workflow, blaming its
code."""

import pytest

from approvals.models import ApprovalRequest, Notification, RequestStatus
from audit.actions import AuditAction
from demo.sandbox.models import LedgerEntry
from runs.definitions.definition import registry
from runs.models import Run, RunStatus
from runs.operator.drills import run_drills
from runs.world_models import ExternalEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _workflows_in_child_processes(settings, live_sandbox):
    import tests.drill_wait_workflows  # noqa: F401  (registers them here too)

    settings.RUNS_WORKFLOW_MODULES = [*settings.RUNS_WORKFLOW_MODULES,
                                      "tests.drill_wait_workflows"]


def _rows(workflow: str) -> dict:
    return {row.drill.split(" (")[0]: row for row in run_drills(registry.latest(workflow))}


def _posted_once_by_each(runs) -> None:
    # The effect counted at the receiver, by the key each run's write sent: one entry each.
    for run in runs:
        key = run.steps.get(name="post").idempotency_key
        assert LedgerEntry.objects.filter(transaction_ref=key).count() == 1, run.business_key


def _by_the_drill(run, action: str) -> int:
    return run.audit_records.filter(action=action, actor_label="drill").count()


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


def test_approve_then_post_is_approved_by_the_drill_and_posts_once():
    rows = _rows("test-drill-approves")

    for title in ("1 crash before the request", "2 crash after the call, before the outcome",
                  "8 same start event delivered 20x at once"):
        assert rows[title].passed, rows[title].observed
    drilled = list(Run.objects.filter(workflow_name="test-drill-approves", drill=True))
    assert len(drilled) == 3
    assert {r.status for r in drilled} == {RunStatus.COMPLETED}
    _posted_once_by_each(drilled)
    assert LedgerEntry.objects.count() == 3
    # Approved once a run, through its request, by the drill; nobody was written to.
    assert all(_by_the_drill(r, AuditAction.APPROVAL_DECIDED) == 1 for r in drilled)
    requests = ApprovalRequest.objects.filter(run__in=drilled)
    assert requests.count() == 3
    assert set(requests.values_list("status", flat=True)) == {RequestStatus.APPROVED}
    assert set(requests.values_list("decided_by__username", flat=True)) == {"drill"}
    assert not Notification.objects.exists()


def test_an_event_wait_with_a_default_is_delivered_it_by_the_drill_and_every_drill_passes():
    rows = _rows("test-drill-settles")

    for title in ("1 crash before the request", "2 crash after the call, before the outcome",
                  "5 restart after the decision was stored",
                  "8 same start event delivered 20x at once",
                  "6 late failure after earlier effects"):
        assert rows[title].passed, rows[title].observed
    drilled = list(Run.objects.filter(workflow_name="test-drill-settles", drill=True))
    assert len(drilled) == 5
    assert sorted(r.status for r in drilled) == sorted(
        [RunStatus.COMPLETED] * 4 + [RunStatus.COMPENSATED])
    # The declared default delivered and the timer woken once a run, each recorded as the
    # drill's; no event skipped, and the write posted the amount the default says.
    assert all(_by_the_drill(r, AuditAction.EVENT_RECEIVED) == 1 for r in drilled)
    assert all(_by_the_drill(r, AuditAction.TIMER_WOKEN) == 1 for r in drilled)
    assert not any(r.audit_records.filter(action=AuditAction.EVENT_SKIPPED).exists()
                   for r in drilled)
    assert all(r.steps.get(name="paid").result == {"amount": "5.00"} for r in drilled)
    _posted_once_by_each(drilled)
    # Five posts, four fees (drill 6's fee failed before it was sent), one reversal.
    assert LedgerEntry.objects.filter(account="expenses:services",
                                      reverses__isnull=True).count() == 5
    assert LedgerEntry.objects.filter(account="expenses:fees").count() == 4
    assert LedgerEntry.objects.filter(reverses__isnull=False).count() == 1


def test_an_event_wait_without_a_default_is_not_made_up_and_the_drills_behind_are_not_exercised():
    rows = _rows("test-drill-awaits-payment")

    why = ("not exercised: the run waits for event payment.settled, which a drill does not "
           "make up (declare on_timeout='continue' with a timeout and a default to drill past it)")
    for title in ("1 crash before the request", "2 crash after the call, before the outcome",
                  "8 same start event delivered 20x at once"):
        assert rows[title].observed == why, rows[title].observed
        assert rows[title].passed is None and not rows[title].exercised
    assert not any(row.passed is False for row in rows.values())
    # Nothing made up, nothing skipped, nothing posted: every run still waits for its event.
    drilled = list(Run.objects.filter(workflow_name="test-drill-awaits-payment", drill=True))
    assert len(drilled) == 3
    assert {r.status for r in drilled} == {RunStatus.WAITING}
    assert not ExternalEvent.objects.exists()
    assert not any(r.audit_records.filter(action__in=(AuditAction.EVENT_SKIPPED,
                                                      AuditAction.EVENT_RECEIVED)).exists()
                   for r in drilled)
    assert not LedgerEntry.objects.exists()
