"""A sleep for a duration, and an event wait's timeout, are counted from the database's
clock: a worker whose own clock stepped back two hours since it last measured the server's
(its estimate of the server's clock two hours behind for a while) puts a run to sleep for
its hour from the server's now, and gives an event wait its hour, not until an hour ago,
which the next sweep would take as due: the sleep would end, the wait time out, at once."""

from datetime import datetime, timedelta

import pytest
from django.db import connection

from audit.actions import AuditAction
from audit.models import AuditRecord
from runs import store
from runs.execution import executor
from runs.models import Run, RunStatus, StepStatus
from tests.factories import new_run, step

pytestmark = pytest.mark.django_db
STEPPED_BACK = timedelta(hours=2)


@pytest.fixture
def estimate_behind(monkeypatch):
    """This process's estimate of the database's clock is two hours behind it."""
    measured = type(store.current()).now
    monkeypatch.setattr(type(store.current()), "now", lambda db: measured(db) - STEPPED_BACK)


def server_now() -> datetime:
    with connection.cursor() as cursor:
        cursor.execute("SELECT clock_timestamp()")
        return cursor.fetchone()[0]


@pytest.mark.usefixtures("estimate_behind")
def test_an_hours_sleep_after_a_step_back_ends_an_hour_from_the_servers_now():
    run = new_run("test-sleepy")
    before = server_now()
    assert executor.advance_run(run.pk, worker="stepped-back") == RunStatus.WAITING
    after = server_now()

    run = Run.objects.get(pk=run.pk)
    cool_off = step(run, "cool-off")
    assert cool_off.status == StepStatus.WAITING
    assert before + timedelta(hours=1) <= run.next_wake_at <= after + timedelta(hours=1)
    assert cool_off.next_attempt_at == run.next_wake_at
    # Not due by the server's clock: no sweep or claim wakes it now.
    assert not Run.objects.filter(pk=run.pk, next_wake_at__lte=server_now()).exists()
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.TIMER_FIRED).exists()


@pytest.mark.usefixtures("estimate_behind")
def test_an_event_waits_hour_after_a_step_back_ends_an_hour_from_the_servers_now():
    run = new_run("test-payment-wait")
    before = server_now()
    assert executor.advance_run(run.pk, worker="stepped-back") == RunStatus.WAITING
    after = server_now()

    run = Run.objects.get(pk=run.pk)
    payment = step(run, "payment")
    assert payment.status == StepStatus.WAITING
    assert before + timedelta(hours=1) <= payment.next_attempt_at <= after + timedelta(hours=1)
    assert not Run.objects.filter(pk=run.pk, next_wake_at__lte=server_now()).exists()
    assert not AuditRecord.objects.filter(run=run, action=AuditAction.EVENT_TIMED_OUT).exists()
