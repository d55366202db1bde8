"""Several events kept for one wait are taken in the order they came, by the database's
clock: a web process whose clock runs an hour ahead stamped the event it kept an hour late,
and the run that began to wait took the event that came after it instead."""

from datetime import timedelta

import pytest

from audit.chain import Actor
from runs import store
from runs.execution import executor
from runs.models import ExternalEvent, RunStatus
from runs.waiting import events
from runs.waiting.kept import consume_kept_for_run
from tests.factories import new_run, step
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)
FIRST = {"amount": 1, "reference": "first"}
SECOND = {"amount": 2, "reference": "second"}


def _keep_from_a_process_an_hour_ahead(run) -> None:
    process = manage("shell", "-c", (
        "from audit.chain import Actor; from runs.waiting import events; "
        "print(events.receive_event(workflow='test-payment-wait', event='payment.settled', "
        f"key={run.business_key!r}, event_id='evt-1', source='psp', payload={FIRST!r}, "
        "actor=Actor.system('payments')).status)"), RUNS_TEST_CLOCK_OFFSET_SECONDS=3600)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.strip().splitlines()[-1] == "kept"


def test_the_event_kept_first_is_taken_first_whatever_the_keepers_clock(script):
    run = new_run("test-payment-wait", wake=False)
    _keep_from_a_process_an_hour_ahead(run)
    assert events.receive_event(
        workflow=run.workflow_name, event="payment.settled", key=run.business_key,
        event_id="evt-2", source="psp", payload=SECOND,
        actor=Actor.system("payments")) == events.Receipt("kept")
    first = ExternalEvent.objects.get(event_id="evt-1")
    assert abs(first.received_at - store.current().now()) < timedelta(minutes=1)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert consume_kept_for_run(run.pk)
    assert step(run, "payment").result == FIRST
    assert ExternalEvent.objects.get(event_id="evt-1").consumed_run_id == run.pk
    assert ExternalEvent.objects.get(event_id="evt-2").consumed_at is None


def test_an_event_that_comes_while_an_older_one_is_kept_for_the_wait_is_kept_after_it(script):
    # The run began to wait, and an event kept for it before was not yet handed over (its
    # worker let go of the run a moment later): the next event to come finds the run
    # waiting, but the run takes the older one, and the newer one is kept.
    run = new_run("test-payment-wait", wake=False)
    assert events.receive_event(
        workflow=run.workflow_name, event="payment.settled", key=run.business_key,
        event_id="evt-1", source="psp", payload=FIRST,
        actor=Actor.system("payments")) == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert events.receive_event(
        workflow=run.workflow_name, event="payment.settled", key=run.business_key,
        event_id="evt-2", source="psp", payload=SECOND,
        actor=Actor.system("payments")) == events.Receipt("kept")
    assert step(run, "payment").result == FIRST
    assert ExternalEvent.objects.get(event_id="evt-1").consumed_run_id == run.pk
    assert ExternalEvent.objects.get(event_id="evt-2").consumed_at is None
