"""An event wait names the event it waits for; an event is sent under that name and kept in
a column of 200 characters. A wait for a longer name, or one holding a control character,
was accepted when declared: the door refused every event sent for it ("event: longer than
200 characters"), so the wait was never woken, and a name too long for the waiting step's
reference failed every claim of its run in the database (the run stayed queued, each
worker raising DataError in turn). Now the declaration fails when its module is imported,
naming the workflow, the step and what is wrong, and declares nothing; a name of 200
characters waits and is woken by its event."""

import pytest

from audit.chain import Actor
from runs.definitions.definition import Workflow, registry
from runs.definitions.validation import DefinitionError
from runs.execution import executor
from runs.models import RunStatus, StepStatus
from runs.waiting.events import FIELD_LENGTHS, receive_event
from tests.factories import new_run, step
from tests.workflows import OrderIn

LONGEST = FIELD_LENGTHS["event"]


def unregistered():
    return Workflow("test-event-name", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("event, why", [
    ("e" * (LONGEST + 1), f"the event's name is {LONGEST + 1} characters long, at most "
                          f"{LONGEST}"),
    ("e" * 290, f"the event's name is 290 characters long, at most {LONGEST}"),
    ("invoice\npaid", "the event's name holds the control character U+000A"),
    ("invoice\x00paid", "the event's name holds the control character U+0000"),
])
def test_a_name_no_event_can_carry_is_refused_naming_the_step(event, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.wait_for_event("paid", event=event)
    assert str(refused.value) == f"workflow test-event-name v1, step 'paid': {why}"
    assert workflow.steps == []


@pytest.mark.django_db
def test_a_name_as_long_as_an_event_may_carry_is_woken_by_its_event():
    event = "e" * LONGEST
    workflow = Workflow("test-event-name", version=1, input=OrderIn)
    try:
        workflow.wait_for_event("paid", event=event)
        run = new_run("test-event-name")
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
        receipt = receive_event(workflow="test-event-name", event=event, key=run.business_key,
                                event_id="evt-1", source="psp", payload={"paid": True},
                                actor=Actor(kind="system", label="psp"))
        assert receipt.status == "delivered"
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
        assert step(run, "paid").status == StepStatus.SUCCEEDED
    finally:
        registry.unregister(workflow)
