"""A run waits for an event whatever the length of its correlation key: a business key of
300 characters (the longest a start takes) does not fit beside the event's name in the
waiting step's reference, so the reference names the key by its sha256. The event finds
its run, early or on time; before, the checkpoint failed on the long reference and the
run went round its lease, its steps sent again, and never waited."""

import pytest

from audit.chain import Actor
from runs.execution import executor
from runs.machine import transitions
from runs.models import ExternalEvent, RunStatus, StepStatus
from runs.waiting import events
from runs.waiting.kept import consume_kept_for_run
from tests.factories import step

pytestmark = pytest.mark.django_db
PAID = {"amount": 120, "reference": "PSP-77"}


def _start(key):
    run, created = transitions.start_run(workflow="test-payment-wait", business_key=key,
                                         input={"order": "o-1"}, actor=Actor.system("t"),
                                         wake=False)
    assert created
    return run


def _send(run, event_id="evt-1"):
    return events.receive_event(workflow=run.workflow_name, event="payment.settled",
                                key=run.business_key, event_id=event_id, source="psp",
                                payload=PAID, actor=Actor.system("payments"))


@pytest.mark.parametrize("length", [270, 300])
def test_a_run_with_a_long_key_waits_once_and_its_event_is_delivered(script, length):
    run = _start("k" * length)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    payment = step(run, "payment")
    assert payment.status == StepStatus.WAITING and len(payment.remote_ref) <= 300
    assert "sha256=" in payment.remote_ref
    assert _send(run) == events.Receipt("delivered", run.pk)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    # Each step ran once: no round of the lease sent the first one again.
    assert [c[0] for c in script.calls] == ["invoice", "book"]


def test_an_event_kept_for_a_long_key_is_consumed_when_the_run_waits(script):
    run = _start("k" * 300)
    other = _start("k" * 299)  # as long, another key: its event is not this run's
    assert _send(other, event_id="evt-other") == events.Receipt("kept")
    assert _send(run) == events.Receipt("kept")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert consume_kept_for_run(run.pk)
    assert step(run, "payment").result == PAID
    assert ExternalEvent.objects.get(event_id="evt-1").consumed_run_id == run.pk
    assert ExternalEvent.objects.get(event_id="evt-other").consumed_run_id is None


def test_a_key_that_fits_is_named_in_full():
    assert transitions.awaiting_ref("payment.settled", "k" * 20) == (
        "awaiting-event:payment.settled:" + "k" * 20)
