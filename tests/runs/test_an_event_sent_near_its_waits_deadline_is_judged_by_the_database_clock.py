"""Whether an event came before its wait's deadline is judged by the database's clock, read
as the run is locked, not by the receiving process's estimate of that clock (which runs ahead
or behind for a while after its own clock stepped). An event sent in time to a process whose
estimate runs ahead is delivered, not kept for the timeout to pass over; one sent after the
deadline to a process whose estimate runs behind is kept, and the timeout decides."""

from datetime import timedelta

import pytest
from django.db import connection

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs import store
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import ExternalEvent, Run, RunStatus, Step, StepStatus
from runs.waiting import events
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
PAID = {"amount": 5, "reference": "PSP-near"}
DEFAULT = {"amount": 0, "reference": "none"}
OFF = timedelta(seconds=90)


def _server_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _waiting_until(deadline_from_now: timedelta) -> Run:
    """A run of test-payment-continue waiting for payment.settled until the database's clock
    plus `deadline_from_now`."""
    run = new_run("test-payment-continue")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    deadline = _server_now() + deadline_from_now
    Step.objects.filter(run=run, name="payment").update(next_attempt_at=deadline)
    Run.objects.filter(pk=run.pk).update(next_wake_at=deadline)
    return run


def _estimate_off_by(monkeypatch, offset: timedelta) -> None:
    """This process's estimate of the database's clock is `offset` off it."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + offset)


def _send(run, event_id="e1"):
    return events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                key=run.business_key, event_id=event_id, source="psp",
                                payload=PAID, actor=Actor.system("psp"))


def test_an_event_in_time_sent_to_a_process_whose_estimate_runs_ahead_is_delivered(
        script, monkeypatch):
    run = _waiting_until(timedelta(seconds=30))
    _estimate_off_by(monkeypatch, OFF)

    assert _send(run) == events.Receipt("delivered", run.pk)
    assert step(run, "payment").status == StepStatus.SUCCEEDED
    assert step(run, "payment").result == PAID
    assert ExternalEvent.objects.get().consumed_run_id == run.pk
    monkeypatch.undo()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert step(run, "book").result == {"paid": PAID}
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_TIMED_OUT).exists()


def test_a_late_event_sent_to_a_process_whose_estimate_runs_behind_is_kept(
        script, monkeypatch):
    run = _waiting_until(-timedelta(seconds=30))
    _estimate_off_by(monkeypatch, -OFF)

    receipt = _send(run)
    assert (receipt.status, receipt.run_id) == ("kept", None)
    # The transition itself, whoever calls it, delivers nothing past the deadline.
    records = AuditRecord.objects.filter(run=run).count()
    with pytest.raises(TransitionNotAllowed, match="its timeout decides"):
        transitions.deliver_event(run.pk, step_name="payment", source="psp", event_id="e2",
                                  payload=PAID, actor=Actor.system("psp"))
    assert AuditRecord.objects.filter(run=run).count() == records
    assert step(run, "payment").status == StepStatus.WAITING
    assert list(ExternalEvent.objects.values_list("event_id", "consumed_at")) == [("e1", None)]

    monkeypatch.undo()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert step(run, "payment").result == DEFAULT
    assert ExternalEvent.objects.get().consumed_at is None
