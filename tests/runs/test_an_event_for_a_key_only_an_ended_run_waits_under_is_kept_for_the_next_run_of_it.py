"""A wait's own correlate() may give one key to many runs: the event names the key, not a
run. A person ended run A at its wait (its step still holds the wait); run B, with the same
key, has not reached the wait yet. An event for the key is then kept as an early event is,
with its keep time: B takes it when it reaches the wait. It is not A's: A, reopened, does
not take it on its own (it came while A was ended), and B still does. An event for such a
wait whose run was ended before reaching it is kept the same way."""

from datetime import timedelta

import pytest

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs.definitions.definition import Workflow, registry
from runs.execution import executor, sweeper
from runs.machine import transitions
from runs.models import ExternalEvent, Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.waiting import events, kept
from tests.factories import new_run, step
from tests.workflows import FAST, OrderIn, scripted_call

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
PSP = Actor.system("psp")
FLOW = "test-one-key-ended"


@pytest.fixture
def one_key_for_all():
    flow = Workflow(FLOW, version=1, input=OrderIn)

    @flow.read("prepare", retry=FAST)
    def prepare(ctx):
        return scripted_call(ctx, lambda: {"prepared": True})

    flow.wait_for_event("paid", event="customer.paid", correlate=lambda data: "customer-9",
                        timeout=timedelta(hours=1), on_timeout="fail")

    @flow.read("book", retry=FAST)
    def book(ctx):
        return scripted_call(ctx, lambda: {"paid": ctx.results.get("paid")})

    yield flow
    registry.unregister(flow)


def _send(event_id="evt-1"):
    return events.receive_event(workflow=FLOW, event="customer.paid", key="customer-9",
                                event_id=event_id, source="psp", payload={"n": event_id},
                                actor=PSP)


def _to_the_wait(run):
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert step(run, "paid").status == StepStatus.WAITING


def _assert_kept(receipt):
    row = ExternalEvent.objects.get()
    assert (receipt.status, receipt.run_id) == ("kept", None)
    assert receipt.keep_until == row.keep_until is not None
    assert (row.consumed_at, row.refused_at, row.expired_at) == (None, None, None)
    assert not AuditRecord.objects.filter(action=AuditAction.EVENT_REFUSED).exists()


def _assert_taken_by(run):
    assert kept.consume_kept_for_run(run.pk)
    paid = step(run, "paid")
    assert (paid.status, paid.result) == (StepStatus.SUCCEEDED, {"n": "evt-1"})
    row = ExternalEvent.objects.get()
    assert (row.consumed_run_id, row.refused_at) == (run.pk, None)
    assert AuditRecord.objects.filter(action=AuditAction.EVENT_RECEIVED).count() == 1
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED


def test_the_event_is_kept_and_the_next_run_that_reaches_the_wait_takes_it(script,
                                                                          one_key_for_all):
    ended, later = new_run(FLOW), new_run(FLOW, wake=False)
    _to_the_wait(ended)
    transitions.terminate(ended.pk, actor=OLGA, reason="a duplicate order")

    _assert_kept(_send())
    assert sweeper.sweep().events == 0

    _to_the_wait(later)
    _assert_taken_by(later)
    assert step(ended, "paid").status == StepStatus.WAITING  # still the ended run's wait


def test_the_ended_run_reopened_does_not_take_it_and_the_next_run_still_does(
        script, one_key_for_all):
    ended, later = new_run(FLOW), new_run(FLOW, wake=False)
    _to_the_wait(ended)
    transitions.terminate(ended.pk, actor=OLGA, reason="a duplicate order")
    _assert_kept(_send())

    ACTIONS["reopen"].perform(ended.pk, actor=OLGA, given=ActionInput(reason="by mistake"))
    assert sweeper.sweep().events == 0
    ACTIONS["resume"].perform(ended.pk, actor=OLGA, given=ActionInput(reason="go on"))
    _to_the_wait(ended)
    assert not kept.consume_kept_for_run(ended.pk)
    assert sweeper.sweep().events == 0
    assert Run.objects.get(pk=ended.pk).status == RunStatus.WAITING
    assert step(ended, "paid").result is None

    _to_the_wait(later)
    _assert_taken_by(later)


def test_an_event_for_a_run_ended_before_it_reached_the_wait_is_kept_for_the_next_run(
        script, one_key_for_all):
    ended, later = new_run(FLOW, wake=False), new_run(FLOW, wake=False)
    transitions.terminate(ended.pk, actor=OLGA, reason="a duplicate order")
    assert step(ended, "paid").status == StepStatus.SKIPPED

    _assert_kept(_send())

    _to_the_wait(later)
    _assert_taken_by(later)


def test_a_person_delivering_by_hand_to_the_reopened_run_leaves_the_event_for_the_next_run(
        script, one_key_for_all):
    ended, later = new_run(FLOW), new_run(FLOW, wake=False)
    _to_the_wait(ended)
    transitions.terminate(ended.pk, actor=OLGA, reason="a duplicate order")
    _assert_kept(_send())
    ACTIONS["reopen"].perform(ended.pk, actor=OLGA, given=ActionInput(reason="by mistake"))

    ACTIONS["event_received"].perform(ended.pk, actor=OLGA, given=ActionInput(
        reason="paid by phone", evidence='{"n": "by hand"}'))

    assert step(ended, "paid").result == {"n": "by hand"}
    sent = ExternalEvent.objects.get(event_id="evt-1")
    assert (sent.consumed_run_id, sent.consumed_at, sent.refused_at) == (None, None, None)
    _to_the_wait(later)
    assert kept.consume_kept_for_run(later.pk)
    assert step(later, "paid").result == {"n": "evt-1"}
    assert ExternalEvent.objects.get(event_id="evt-1").consumed_run_id == later.pk
