"""A sender that sends the same event twice at once (a retry after a timeout, two webhook
workers) finds one delivery and one duplicate, and both answers name the run that took it,
as a redelivery that comes later is answered: the second learned it was a duplicate only
once the first had committed, and was told of no run."""

import threading

import pytest
from django.db import connection, connections, transaction

from audit.chain import Actor
from audit.models import AuditRecord
from runs.execution import executor
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.waiting import events
from tests.factories import new_run, step
from tests.processes import wait_for

pytestmark = pytest.mark.django_db(transaction=True)
PAID = {"amount": 120, "reference": "PSP-77"}


def _send(run):
    return events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                key=run.business_key, event_id="evt-1", source="psp",
                                payload=PAID, actor=Actor.system("payments"))


def _in_thread(fn, out: list):
    def go():
        try:
            out.append(fn())
        finally:
            connections.close_all()
    thread = threading.Thread(target=go)
    thread.start()
    return thread


def _waiting_on_a_lock() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                       "current_database() AND wait_event_type = 'Lock'")
        return cursor.fetchone()[0]


def test_two_sends_at_once_deliver_once_and_both_name_the_run(script):
    run = new_run("test-payment-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    locked, release, receipts = threading.Event(), threading.Event(), []

    def hold_the_run():
        # Both sends have looked for an earlier delivery and found none before either may
        # take the run: the moment a second send races the first.
        with transaction.atomic():
            Run.objects.select_for_update().get(pk=run.pk)
            locked.set()
            release.wait(30)

    holder = _in_thread(hold_the_run, [])
    assert locked.wait(30)
    senders = [_in_thread(lambda: _send(run), receipts) for _ in range(2)]
    wait_for(lambda: _waiting_on_a_lock() >= 2, timeout=30, what="both sends at the lock")
    release.set()
    for thread in (holder, *senders):
        thread.join(60)

    assert sorted(receipts, key=lambda r: r.status) == [
        events.Receipt("delivered", run.pk), events.Receipt("duplicate", run.pk)]
    assert step(run, "payment").status == StepStatus.SUCCEEDED
    assert AuditRecord.objects.filter(run=run, action="event_received").count() == 1
    assert ExternalEvent.objects.get().consumed_run_id == run.pk
