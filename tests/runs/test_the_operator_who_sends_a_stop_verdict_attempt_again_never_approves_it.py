"""Four eyes on an attempt of a step with the stop verdict, held by the transition itself
(runs.machine.transitions.approval_waits.decide_approval), as a resent tool call's is held by
decide_tool_call: the operator who sent the attempt again (Retry step, or Resume after the
previous attempt's decision) is refused as its approver, whoever calls the transition; a
second person decides it. The payment receiver is a real HTTP server."""

import pytest
from django.contrib.auth.models import User

from audit.chain import Actor
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import SecondPersonRequired
from runs.machine.transitions import start_run
from runs.models import RunStatus, StepStatus
from tests.factories import SYSTEM, step
from tests.receiver import ScriptedReceiver
from tests.workflows import stop_receiver

pytestmark = pytest.mark.django_db(transaction=True)

STEP = "pay-unkeyed"


@pytest.fixture
def receiver():
    with ScriptedReceiver() as server:
        stop_receiver.url = server.url
        yield server
    stop_receiver.url = ""


def _person(name: str) -> Actor:
    return Actor.for_user(User.objects.create_user(name))


def _stopped_after_an_approved_attempt(receiver, order: str):
    """A run whose first, approved, payment attempt was refused for good (400): attention."""
    receiver.answer("POST", "/pay", 400, 200)
    run, _ = start_run(workflow="test-stop-verdict", business_key=order,
                       input={"order": order, "amount": 120}, actor=SYSTEM)
    executor.advance_run(run.pk, worker="w1")
    transitions.decide_approval(run.pk, step_name=STEP, approved=True,
                                actor=_person("first-approver"))
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION and len(receiver.sent("POST", "/pay")) == 1
    return run


SEND_AGAIN = {
    "retry step": lambda run, operator: transitions.retry_step(
        run.pk, step_name=STEP, actor=operator, reason="vendor fixed its account"),
    "resume": lambda run, operator: transitions.resume(
        run.pk, actor=operator, reason="vendor fixed its account"),
}


@pytest.mark.parametrize("send_again", SEND_AGAIN.values(), ids=SEND_AGAIN.keys())
def test_the_transition_refuses_the_operator_who_sent_the_attempt_again(receiver, send_again):
    run = _stopped_after_an_approved_attempt(receiver, "four-eyes")
    operator = _person("operator")
    send_again(run, operator)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and step(run, STEP).status == StepStatus.WAITING

    with pytest.raises(SecondPersonRequired, match="operator sent pay-unkeyed again"):
        transitions.decide_approval(run.pk, step_name=STEP, approved=True, actor=operator)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and step(run, STEP).status == StepStatus.WAITING

    # Another person decides it, and only then is it paid.
    transitions.decide_approval(run.pk, step_name=STEP, approved=True,
                                actor=_person("second-person"))
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and len(receiver.sent("POST", "/pay")) == 2


def test_the_person_who_sent_nothing_again_may_approve_the_first_attempt(receiver):
    receiver.answer("POST", "/pay", 200)
    run, _ = start_run(workflow="test-stop-verdict", business_key="first-attempt",
                       input={"order": "first-attempt", "amount": 120}, actor=SYSTEM)
    executor.advance_run(run.pk, worker="w1")
    transitions.decide_approval(run.pk, step_name=STEP, approved=True,
                                actor=_person("approver"))
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and len(receiver.sent("POST", "/pay")) == 1
