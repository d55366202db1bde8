"""Two runs of one workflow wait for the same event under the same key (their correlate()
gives one customer's key to both). A person terminates the older one: its step still holds
the wait, so that an event for it alone is refused for it. An event for the key then goes to
the run that still listens, not refused for the ended one and left undelivered. Where every
run waiting under the key was ended, the event is kept for the key, as an early event is
(the key names no run: another may reach the wait), passed over by the ended run."""

from datetime import timedelta

import pytest

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import Workflow, registry
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import ExternalEvent, RunStatus, StepStatus
from runs.waiting import events, kept
from tests.factories import new_run, step
from tests.workflows import FAST, OrderIn, scripted_call

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
PSP = Actor.system("psp")


@pytest.fixture
def one_key_for_all():
    flow = Workflow("test-one-customer", version=1, input=OrderIn)
    flow.wait_for_event("paid", event="customer.paid", correlate=lambda data: "customer-7",
                        timeout=timedelta(hours=1), on_timeout="fail")

    @flow.read("book", retry=FAST)
    def book(ctx):
        return scripted_call(ctx, lambda: {"paid": ctx.results.get("paid")})

    yield flow
    registry.unregister(flow)


def _waiting():
    run = new_run("test-one-customer")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    return run


def _send(event_id):
    return events.receive_event(workflow="test-one-customer", event="customer.paid",
                                key="customer-7", event_id=event_id, source="psp",
                                payload={"n": event_id}, actor=PSP)


def test_the_event_goes_to_the_run_still_waiting_not_to_the_ended_one(script,
                                                                        one_key_for_all):
    ended, listening = _waiting(), _waiting()
    transitions.terminate(ended.pk, actor=OLGA, reason="a duplicate order")

    assert _send("evt-1") == events.Receipt("delivered", listening.pk)

    paid = step(listening, "paid")
    assert (paid.status, paid.result) == (StepStatus.SUCCEEDED, {"n": "evt-1"})
    row = ExternalEvent.objects.get()
    assert (row.consumed_run_id, row.refused_run_id, row.refused_at) == (listening.pk, None,
                                                                          None)
    assert not AuditRecord.objects.filter(action=AuditAction.EVENT_REFUSED).exists()
    assert step(ended, "paid").status == StepStatus.WAITING  # still the ended run's
    assert sweeper.sweep().events == 0
    assert executor.advance_run(listening.pk, worker="w1") == RunStatus.COMPLETED


def test_past_many_ended_runs_read_a_few_at_a_time(script, one_key_for_all, monkeypatch):
    monkeypatch.setattr(kept, "WAITS_CHUNK", 2)
    ended = [_waiting() for _ in range(3)]
    listening = _waiting()
    for run in ended:
        transitions.terminate(run.pk, actor=OLGA, reason="a duplicate order")

    assert _send("evt-1") == events.Receipt("delivered", listening.pk)
    assert not ExternalEvent.objects.filter(refused_at__isnull=False).exists()


def test_where_every_run_waiting_under_the_key_was_ended_the_event_is_kept_for_the_key(
        script, one_key_for_all):
    ended = _waiting()
    transitions.terminate(ended.pk, actor=OLGA, reason="a duplicate order")

    receipt = _send("evt-1")

    row = ExternalEvent.objects.get()
    assert receipt == events.Receipt("kept") and receipt.keep_until == row.keep_until
    assert (row.consumed_at, row.refused_at, row.refused_run_id) == (None, None, ended.pk)
    assert row.state == "kept"
    assert not AuditRecord.objects.filter(action=AuditAction.EVENT_REFUSED).exists()
