"""A run that a person resumes while it sleeps or waits for an event is claimed at once, not
when its time is due by the database's clock: whether that time has come is then asked of
the database, not taken from the worker's estimate of its clock (which runs ahead for a
while after the worker's own clock stepped forward). Such a worker puts the run back to
sleep, or back to waiting, until its time; it neither wakes the timer early nor applies the
event wait's timeout policy before the deadline."""

from datetime import timedelta

import pytest
from django.db import connection

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs import store
from runs.execution import executor
from runs.machine import transitions
from runs.models import Run, RunStatus, Step, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
AHEAD = timedelta(seconds=90)
OLGA = Actor(kind="user", label="olga")


def _server_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


def _resumed_with_its_time_30s_away(workflow: str, step_name: str, monkeypatch):
    """A run of `workflow` waiting at `step_name` until the database's clock plus 30 s,
    resumed by a person, then claimed by a worker whose estimate of that clock runs 90 s
    ahead. Returns the run and its step's time."""
    run = new_run(workflow)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    until = _server_now() + timedelta(seconds=30)
    Step.objects.filter(run=run, name=step_name).update(next_attempt_at=until)
    Run.objects.filter(pk=run.pk).update(next_wake_at=until)
    transitions.resume(run.pk, actor=OLGA, reason="look again")
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) + AHEAD)
    assert executor.advance_run(run.pk, worker="ahead") == RunStatus.WAITING
    return Run.objects.get(pk=run.pk), until


def test_a_resumed_event_wait_is_not_timed_out_before_its_deadline(script, monkeypatch):
    run, until = _resumed_with_its_time_30s_away("test-payment-continue", "payment",
                                                 monkeypatch)
    payment = step(run, "payment")
    assert (payment.status, payment.next_attempt_at, payment.result) == (
        StepStatus.WAITING, until, None)
    assert run.next_wake_at == until
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_TIMED_OUT).exists()
    assert step(run, "book").status == StepStatus.PENDING
    assert [c[0] for c in script.calls] == ["invoice"]


def test_a_resumed_sleep_is_not_woken_before_its_time(script, monkeypatch):
    run, until = _resumed_with_its_time_30s_away("test-sleepy", "cool-off", monkeypatch)
    nap = step(run, "cool-off")
    assert (nap.status, nap.next_attempt_at) == (StepStatus.WAITING, until)
    assert run.next_wake_at == until
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.TIMER_FIRED).exists()
    assert [c[0] for c in script.calls] == ["look"]


def test_a_resumed_wait_whose_time_the_database_passed_ends_at_once(script):
    run = new_run("test-payment-fail")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    past = _server_now() - timedelta(seconds=1)
    Step.objects.filter(run=run, name="payment").update(next_attempt_at=past)
    transitions.resume(run.pk, actor=OLGA, reason="look again")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    assert step(run, "payment").status == StepStatus.FAILED
    assert AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_TIMED_OUT).count() == 1
