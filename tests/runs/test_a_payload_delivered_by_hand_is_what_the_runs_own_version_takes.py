"""Deliver event (by hand) checks the person's payload against the run's own version, as
an event sent to the door is. It checked the newest version's reading of it instead, with
that version's defaults filled in: once a release added a field with a default to the
event's schema, a run of the older version whose schema forbids unknown fields could not be
given its event by hand at all, though the same payload sent to the door was delivered."""

import json

import pytest
from pydantic import BaseModel, ConfigDict

from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput, ActionInputError
from runs.waiting import events
from tests.factories import new_run, step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
NAME = "test-settled-versions"


class SettledV1(BaseModel):
    model_config = ConfigDict(extra="forbid")
    amount: int


class SettledV2(SettledV1):
    currency: str = "EUR"


@pytest.fixture
def v1_run_waiting(script):
    """A run of version 1 waiting for its payment, version 2 registered since."""
    v1 = Workflow(NAME, version=1, input=OrderIn)
    v1.wait_for_event("payment", event="payment.settled", schema=SettledV1)
    declared = [v1]
    try:
        run = new_run(NAME)
        v2 = Workflow(NAME, version=2, input=OrderIn)
        v2.wait_for_event("payment", event="payment.settled", schema=SettledV2)
        declared.append(v2)
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
        yield run
    finally:
        for flow in declared:
            registry.unregister(flow)


def deliver_by_hand(run, payload):
    ACTIONS["event_received"].perform(
        run.pk, actor=OLGA, given=ActionInput(reason="the PSP confirmed it by phone",
                                              evidence=json.dumps(payload)))


def test_a_payload_the_runs_version_takes_is_delivered_by_hand(v1_run_waiting):
    deliver_by_hand(v1_run_waiting, {"amount": 5})

    payment = step(v1_run_waiting, "payment")
    assert (payment.status, payment.result) == (StepStatus.SUCCEEDED, {"amount": 5})


def test_a_payload_only_the_newer_version_takes_is_refused_naming_the_runs_version(
        v1_run_waiting):
    with pytest.raises(ActionInputError, match="version 1"):
        deliver_by_hand(v1_run_waiting, {"amount": 5, "currency": "USD"})

    assert step(v1_run_waiting, "payment").status == StepStatus.WAITING
    assert not AuditRecord.objects.filter(run=v1_run_waiting, action="event_received").exists()


def test_the_door_delivers_the_same_payload_alike(v1_run_waiting):
    receipt = events.receive_event(workflow=NAME, event="payment.settled",
                                   key=v1_run_waiting.business_key, event_id="evt-1",
                                   source="psp", payload={"amount": 5},
                                   actor=Actor.system("psp"))

    assert receipt.status == "delivered"
    assert step(v1_run_waiting, "payment").result == {"amount": 5}
