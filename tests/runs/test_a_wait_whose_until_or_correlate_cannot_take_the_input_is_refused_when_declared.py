"""A sleep's `until` and an event wait's `correlate` are functions of the run's input, called
as until(input) / correlate(input) when a run reaches the wait. Given something else (the
time itself instead of a function giving it, a function of no argument, a coroutine), the
declaration fails when its module is imported, with a DefinitionError naming the workflow,
the step and what is wrong, and declares nothing. Accepted, each ran until the first run
reached the wait, then held every run there for a person."""

from datetime import UTC, datetime

import pytest

from runs.definitions.definition import Workflow
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

NEW_YEAR = datetime(2031, 1, 1, tzinfo=UTC)


async def at_new_year(data):
    return NEW_YEAR


def unregistered():
    return Workflow("test-wait-mistakes", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("until, why", [
    (NEW_YEAR, "until must be a function of the run's input, not datetime.datetime(2031"),
    (lambda: NEW_YEAR, "its until function () cannot be called as until(input)"),
    (lambda data, zone: NEW_YEAR, "its until function (data, zone) cannot be called as "
                                  "until(input)"),
    (at_new_year, "its until function is async"),
])
def test_a_sleep_until_that_cannot_take_the_input_is_refused(until, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.sleep("cool-off", until=until)
    assert str(refused.value).startswith(
        f"workflow test-wait-mistakes v1, step 'cool-off': {why}")
    assert workflow.steps == []


@pytest.mark.parametrize("correlate, why", [
    ("order", "correlate must be a function of the run's input, not 'order'"),
    (lambda: "k", "its correlate function () cannot be called as correlate(input)"),
])
def test_an_event_waits_correlate_that_cannot_take_the_input_is_refused(correlate, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.wait_for_event("paid", event="payment.settled", correlate=correlate)
    assert str(refused.value).startswith(f"workflow test-wait-mistakes v1, step 'paid': {why}")
    assert workflow.steps == []


def test_functions_of_the_input_are_declared():
    workflow = unregistered()
    workflow.sleep("cool-off", until=lambda data: NEW_YEAR)
    workflow.wait_for_event("paid", event="payment.settled",
                            correlate=lambda data, *rest: data["order"])
    assert [s.name for s in workflow.steps] == ["cool-off", "paid"]
    assert workflow.step("paid").correlate({"order": "o-1"}) == "o-1"
