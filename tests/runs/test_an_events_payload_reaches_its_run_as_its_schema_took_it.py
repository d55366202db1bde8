"""An event's payload, accepted by the waiting step's schema, is what the run's next steps
read as the step's result, whether it was delivered to the waiting run or kept until the run
waited. Fields whose names only hold a secret's letters (passengers, passport_country) are
no credentials: stored masked, the run read "[redacted]" where the schema promised a number,
and an event kept for a run of an older version, checked against that version after it was
stored, was refused for it and never delivered."""

import pytest
from pydantic import BaseModel

from audit.chain import Actor
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import ExternalEvent, RunStatus, StepStatus
from runs.waiting import events
from runs.waiting.kept import consume_kept_for_run
from tests.factories import new_run, step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db

PAYLOAD = {"passengers": 2, "passport_country": "DE", "reference": "B-1"}


class Booking(BaseModel):
    passengers: int
    passport_country: str
    reference: str


class BookingV2(Booking):
    fare_class: str = "Y"


@pytest.fixture
def booking_wait():
    flow = Workflow("test-booking-wait", version=1, input=OrderIn)
    flow.wait_for_event("booking", event="booking.confirmed", schema=Booking)
    yield flow
    registry.unregister(flow)


def send(run, event_id):
    return events.receive_event(workflow=run.workflow_name, event="booking.confirmed",
                                key=run.business_key, event_id=event_id, source="airline",
                                payload=PAYLOAD, actor=Actor.system("airline"))


def test_an_event_delivered_to_its_waiting_run_is_its_result_as_sent(script, booking_wait):
    run = new_run("test-booking-wait")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    assert send(run, "evt-1") == events.Receipt("delivered", run.pk)

    booking = step(run, "booking")
    assert booking.status == StepStatus.SUCCEEDED
    assert booking.result == PAYLOAD


def test_an_event_kept_before_its_wait_is_its_result_as_sent(script, booking_wait):
    run = new_run("test-booking-wait")
    assert send(run, "evt-2").status == "kept"
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    consume_kept_for_run(run.pk)

    booking = step(run, "booking")
    assert booking.status == StepStatus.SUCCEEDED
    assert booking.result == PAYLOAD


def test_an_event_kept_for_a_run_of_an_older_version_is_delivered_not_refused(script):
    name = "test-booking-versions"
    v1 = Workflow(name, version=1, input=OrderIn)
    v1.wait_for_event("booking", event="booking.confirmed", schema=Booking)
    declared = [v1]
    try:
        run = new_run(name)
        v2 = Workflow(name, version=2, input=OrderIn)
        v2.wait_for_event("booking", event="booking.confirmed", schema=BookingV2)
        declared.append(v2)
        assert send(run, "evt-3").status == "kept"
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

        consume_kept_for_run(run.pk)

        kept = ExternalEvent.objects.get(event_id="evt-3")
        assert (kept.refused_at, kept.refused_reason) == (None, "")
        booking = step(run, "booking")
        assert (booking.status, booking.result) == (StepStatus.SUCCEEDED, PAYLOAD)
    finally:
        for flow in declared:
            registry.unregister(flow)
