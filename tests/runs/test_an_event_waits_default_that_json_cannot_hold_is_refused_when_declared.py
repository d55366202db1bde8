"""An event wait's `default` is what a "continue" timeout stores as the step's result. One
JSON cannot hold (a Decimal, a datetime, a model instance, NaN) was accepted when declared;
once a run's wait timed out, every claim of it failed in the worker with "cannot write
Decimal in a checkpoint" and the run stayed waiting past its deadline, retried for ever.
Now the declaration fails when its module is imported, naming the workflow, the step and
what is wrong, and declares nothing."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from runs.definitions.definition import Workflow
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


def unregistered():
    return Workflow("test-wait-default", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("default, why", [
    ({"amount": Decimal("1.50")}, "Object of type Decimal is not JSON serializable"),
    (datetime(2031, 1, 1, tzinfo=UTC), "Object of type datetime is not JSON serializable"),
    ({"ratio": float("nan")}, "Out of range float values are not JSON compliant"),
    (OrderIn(order="o-1"), "Object of type OrderIn is not JSON serializable"),
])
def test_a_default_json_cannot_hold_is_refused_naming_the_step(default, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.wait_for_event("paid", event="payment.settled", timeout=timedelta(hours=1),
                                on_timeout="continue", default=default)
    assert str(refused.value).startswith(
        "workflow test-wait-default v1, step 'paid': its default must be JSON")
    assert why in str(refused.value)
    assert workflow.steps == []


@pytest.mark.parametrize("default", [None, {"status": "unpaid", "amount": "1.50"},
                                     ["a", 1, 2.5, True]])
def test_a_json_default_is_declared(default):
    workflow = unregistered()
    workflow.wait_for_event("paid", event="payment.settled", timeout=timedelta(hours=1),
                            on_timeout="continue", default=default)
    assert workflow.step("paid").default == default
