"""An event names its key, not a run: one that comes for a key after the run that waited
under it completed is kept as an early event is, for the next wait under that key. A re-run
of that run from its wait is such a wait: within the event's keep time it takes it, once,
recorded as received from its sender (not settled by a person, who settled nothing)."""

import pytest

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import ExternalEvent, RunStatus, StepStatus
from runs.waiting import events
from runs.waiting.kept import consume_kept_for_run
from tests.factories import new_run, step
from tests.runs.kept_events import OLGA, PAID, send

pytestmark = pytest.mark.django_db


def test_the_rerun_takes_the_event_kept_after_the_run_completed(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert send(run, "payment.settled") == events.Receipt("delivered", run.pk)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert send(run, "payment.settled", event_id="evt-2") == events.Receipt("kept")

    transitions.rerun_from_step(run.pk, step_name="payment", actor=OLGA, reason="again")
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.WAITING
    assert consume_kept_for_run(run.pk)
    assert sweeper.sweep().events == 0

    payment = step(run, "payment")
    assert (payment.status, payment.result) == (StepStatus.SUCCEEDED, PAID)
    assert payment.remote_ref == "event:psp:evt-2"
    second = ExternalEvent.objects.get(event_id="evt-2")
    assert (second.consumed_run_id, second.consumed_step) == (run.pk, "payment")
    received = AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_RECEIVED)
    assert [r.data["event_id"] for r in received.order_by("pk")] == ["evt-1", "evt-2"]
    assert executor.advance_run(run.pk, worker="w2") == RunStatus.COMPLETED
