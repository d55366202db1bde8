"""Two events are kept for one wait before its run reaches it: the first in the shape of a
newer version (the run's own version refuses it), the second in the run's own shape. As the
run begins to wait, the first is refused for it and the second is delivered there and then,
not left for a later pass; and an event that comes after them, while the second is still
kept (the worker's look after the wait was lost), does not overtake it: the run takes the
second, and the later one is kept."""

from datetime import timedelta

import pytest
from pydantic import BaseModel

from audit.chain import Actor
from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import ExternalEvent, RunStatus, StepStatus
from runs.waiting import events
from runs.waiting.kept import consume_kept_for_run
from tests.factories import new_run, step
from tests.workflows import FAST, OrderIn, scripted_call

pytestmark = pytest.mark.django_db
PSP = Actor.system("psp")


class V1(BaseModel):
    amount: int


class V2(BaseModel):
    amount_cents: int


def _version(version: int, schema) -> Workflow:
    workflow = Workflow("test-kept-in-two-shapes", version=version, input=OrderIn)
    workflow.wait_for_event("payment", event="paid", schema=schema,
                            timeout=timedelta(hours=1), on_timeout="escalate")

    @workflow.read("book", retry=FAST)
    def book(ctx):
        return scripted_call(ctx, lambda: {"paid": ctx.results.get("payment")})

    return workflow


@pytest.fixture
def v1_run_with_two_kept(script):
    """A run of version 1 (not yet waiting), version 2 released since, and two events kept
    for its wait: e-1 in version 2's shape, e-2 in version 1's."""
    made = [_version(1, V1)]
    run = new_run("test-kept-in-two-shapes")
    made.append(_version(2, V2))
    assert _send(run, "e-1", {"amount_cents": 500}).status == "kept"
    assert _send(run, "e-2", {"amount": 5}).status == "kept"
    yield run
    for workflow in made:
        registry.unregister(workflow)


def _send(run, event_id, payload):
    return events.receive_event(workflow=run.workflow_name, event="paid", key=run.business_key,
                                event_id=event_id, source="psp", payload=payload, actor=PSP)


def _states():
    return {e.event_id: (e.state, e.consumed_run_id, e.refused_run_id)
            for e in ExternalEvent.objects.all()}


def test_the_run_beginning_to_wait_takes_the_next_kept_event_at_once(v1_run_with_two_kept):
    run = v1_run_with_two_kept
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    assert consume_kept_for_run(run.pk)

    assert step(run, "payment").result == {"amount": 5}
    assert _states() == {"e-1": ("refused", None, run.pk), "e-2": ("delivered", run.pk, None)}


def test_an_event_that_comes_later_does_not_overtake_the_one_kept(v1_run_with_two_kept):
    run = v1_run_with_two_kept
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    # The worker's look for a kept event was lost; the sweeper has not come by yet.

    assert _send(run, "e-3", {"amount": 9}) == events.Receipt("kept", keep_until=None)

    payment = step(run, "payment")
    assert (payment.status, payment.result) == (StepStatus.SUCCEEDED, {"amount": 5})
    assert _states() == {"e-1": ("refused", None, run.pk), "e-2": ("delivered", run.pk, None),
                         "e-3": ("kept", None, None)}
