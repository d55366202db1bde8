"""An event wait's `on_timeout` applies when its `timeout` passes with no event. "fail" or
"continue" declared with no timeout was accepted: the wait was given no deadline
(runs.machine.transitions.events), so the policy never applied, and a run whose author
meant it to fail, or to go on with the default, waited for the event for ever. Now such a
wait is refused when declared, naming the workflow, the step and both options, and nothing
is declared. Without a timeout, the default policy ("escalate") is the wait's own: it
waits for the event, or for a person."""

from datetime import timedelta

import pytest

from runs.definitions.definition import Workflow
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


def unregistered():
    return Workflow("test-wait-policy", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("policy", ["fail", "continue"])
def test_a_policy_that_applies_at_a_timeout_with_no_timeout_is_refused(policy):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.wait_for_event("paid", event="payment.settled", on_timeout=policy,
                                default={"status": "unpaid"})
    assert str(refused.value) == (
        f"workflow test-wait-policy v1, step 'paid': on_timeout={policy!r} applies when "
        "its timeout passes, and no timeout is declared: declare timeout=timedelta(...), "
        "or leave on_timeout unset to wait for the event")
    assert workflow.steps == []


@pytest.mark.parametrize("policy", ["fail", "continue", "escalate"])
def test_a_policy_with_a_timeout_is_declared(policy):
    workflow = unregistered()
    workflow.wait_for_event("paid", event="payment.settled", timeout=timedelta(hours=1),
                            on_timeout=policy)
    assert workflow.step("paid").on_timeout == policy


def test_a_wait_with_neither_is_declared_and_waits_for_the_event():
    workflow = unregistered()
    workflow.wait_for_event("paid", event="payment.settled")
    assert (workflow.step("paid").timeout, workflow.step("paid").on_timeout) == (
        None, "escalate")
