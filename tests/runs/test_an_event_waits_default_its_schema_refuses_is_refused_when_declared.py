"""An event wait's `default` is what a "continue" timeout stores as the step's result, read
by the steps after it as they read an event's payload. A default its `schema` refuses was
accepted when declared: a run whose wait timed out went on with a result no event could
have brought (an amount that is text where the schema says a number, a field missing).
Now the declaration fails when its module is imported, naming the workflow, the step, the
option and the schema's first fault, checked as a delivered event's payload is
(runs.waiting.payloads), and declares nothing. A default of None is no payload: the step's
result is null, as before."""

from datetime import timedelta

import pytest
from pydantic import BaseModel

from runs.definitions.definition import Workflow
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


class Settled(BaseModel):
    amount: int
    reference: str


def unregistered():
    return Workflow("test-wait-default-schema", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("default, fault", [
    ({"amount": "unpaid", "reference": "none"},
     "amount: Input should be a valid integer, unable to parse string as an integer"),
    ({"amount": 0}, "reference: Field required"),
    (["unpaid"], "the default: Input should be a valid dictionary or instance of Settled"),
])
def test_a_default_the_schema_refuses_is_refused_naming_the_step_and_the_fault(default, fault):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.wait_for_event("paid", event="payment.settled", schema=Settled,
                                timeout=timedelta(hours=1), on_timeout="continue",
                                default=default)
    assert str(refused.value) == (
        "workflow test-wait-default-schema v1, step 'paid': its default does not match its "
        f"schema Settled, as an event's payload must: {fault}")
    assert "\n" not in str(refused.value)
    assert workflow.steps == []


@pytest.mark.parametrize("default", [None, {"amount": 0, "reference": "none"},
                                     {"amount": "5", "reference": "none"}])
def test_a_default_the_schema_takes_or_none_is_declared(default):
    workflow = unregistered()
    workflow.wait_for_event("paid", event="payment.settled", schema=Settled,
                            timeout=timedelta(hours=1), on_timeout="continue",
                            default=default)
    assert workflow.step("paid").default == default


def test_a_default_with_no_schema_is_declared_as_json():
    workflow = unregistered()
    workflow.wait_for_event("paid", event="payment.settled", timeout=timedelta(hours=1),
                            on_timeout="continue", default={"anything": ["goes"]})
    assert workflow.step("paid").default == {"anything": ["goes"]}
