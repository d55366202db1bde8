"""Whether a run waits for a person's approval is read one way (operator_rules.awaited_approval,
from the run's steps): Resume's refusal and the drill kit, which approves what waits for a
person and delivers or wakes what waits on the world, ask the same rule. It agrees with the
ApprovalWait rows the approvals sweep opens requests from, written in the transaction that
makes the step wait; a sleep and an event wait have no row and are not read as a person's."""

import pytest

from runs.execution import executor
from runs.machine import transitions
from runs.models import Run, RunStatus
from runs.operator.drill_waits import waits_for_approval
from tests.agent_runs import SMALL, advance
from tests.factories import SYSTEM
from tests.receiver import ScriptedReceiver
from tests.workflows import stop_receiver

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _approval_settings(settings, empty_broker):
    settings.APPROVALS_BASE_URL = "http://testserver"


@pytest.fixture
def receiver():
    with ScriptedReceiver() as server:
        stop_receiver.url = server.url
        yield server
    stop_receiver.url = ""


def _readings(run: Run) -> tuple[bool, bool, bool]:
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    steps = list(run.steps.order_by("position"))
    return (transitions.awaited_approval(run, steps) is not None, waits_for_approval(run),
            run.approval_waits.exists())


def _started(workflow: str, key: str, input: dict) -> Run:
    run, _ = transitions.start_run(workflow=workflow, business_key=key, input=input,
                                   actor=SYSTEM, wake=False)
    executor.advance_run(run.pk, worker="w1")
    return run


def test_an_approval_step_is_read_as_waiting_for_a_person_by_every_reader(script):
    run = _started("test-approval", "one-way-1", {"order": "one-way-1", "amount": 5})
    assert _readings(run) == (True, True, True)


def test_an_attempt_held_by_the_stop_verdict_is_read_so_by_every_reader(receiver):
    run = _started("test-stop-verdict", "one-way-2", {"order": "one-way-2", "amount": 120})
    assert _readings(run) == (True, True, True)
    assert len(receiver.sent("POST", "/pay")) == 0


def test_a_tool_call_waiting_for_its_approval_is_read_so_by_every_reader(live_sandbox):
    data = {"tenant": "tenant-42", "invoice_number": SMALL,
            "requester_email": "requester@example.com", "notes": ""}
    run, _ = transitions.start_run(workflow="test-triage-stop-verdict",
                                   business_key=f"one-way:{SMALL}", input=data, actor=SYSTEM,
                                   wake=False)
    run = advance(run)
    assert len(transitions.waiting_tool_calls(run)) == 1
    assert _readings(run) == (True, True, True)


def test_a_sleep_and_an_event_wait_are_read_as_waiting_for_no_person(receiver):
    sleeping = _started("test-sleepy", "one-way-3", {"order": "one-way-3"})
    assert transitions.sleeping_step(list(sleeping.steps.all())) is not None
    assert _readings(sleeping) == (False, False, False)

    awaiting = _started("test-event-then-send", "one-way-4", {"n": 1, "url": receiver.url})
    assert transitions.waiting_event_step(list(awaiting.steps.all())) is not None
    assert _readings(awaiting) == (False, False, False)
