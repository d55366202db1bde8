"""An approval step's rule (approve_if) is checked where it is declared, as an agent tool's
is: something that cannot be called as approve_if(snapshot) (not a function, a function of
no argument or of two, an async function whose coroutine no worker awaits) is refused with
a DefinitionError naming the workflow, the step and what is wrong, and no step is declared.
Left to run time, each would raise at every run and leave every step to a person, saying so
only in a log."""

import pytest

from runs.definitions.definition import Workflow
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

AT = "workflow test-approval-rule-refusals v1, step 'approve'"


async def later(snapshot):
    return False


REFUSED = {
    "not a function": (True, f"{AT}: its approve_if must be callable, not bool"),
    "a function of nothing": (lambda: False,
                              f"{AT}: its approve_if () cannot be called as (snapshot)"),
    "a function of two": (lambda snapshot, ctx: False,
                          f"{AT}: its approve_if (snapshot, ctx) cannot be called as "
                          "(snapshot)"),
    "an async function": (later, f"{AT}: its approve_if is async"),
}


def snapshot(ctx):
    return {"amount": ctx.input.amount}


def declare(rule) -> Workflow:
    workflow = Workflow("test-approval-rule-refusals", version=1, input=OrderIn,
                        register=False)
    workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject",
                      approve_if=rule)(snapshot)
    return workflow


@pytest.mark.parametrize("mistake", list(REFUSED))
def test_a_rule_that_cannot_be_asked_with_a_snapshot_is_refused(mistake):
    rule, said = REFUSED[mistake]
    workflow = Workflow("test-approval-rule-refusals", version=1, input=OrderIn,
                        register=False)
    with pytest.raises(DefinitionError) as refused:
        workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject",
                          approve_if=rule)(snapshot)
    assert str(refused.value).startswith(said), str(refused.value)
    assert workflow.steps == []


def test_a_rule_of_the_snapshot_is_declared_with_its_step():
    def under_a_thousand_needs_no_one(snapshot):
        return snapshot["amount"] >= 1000

    (step,) = declare(under_a_thousand_needs_no_one).steps
    assert step.approve_if is under_a_thousand_needs_no_one
    assert step.plain_description == "wait for a person's approval, unless its rule approves"
    (plain,) = declare(None).steps
    assert plain.approve_if is None
    assert plain.plain_description == "wait for a person's approval"
