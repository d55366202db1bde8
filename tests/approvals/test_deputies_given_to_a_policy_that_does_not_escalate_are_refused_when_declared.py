"""`escalate_to` names the deputies a request is escalated to when nobody decided it in
time, which only the "escalate" timeout policy does (approvals.timeouts). Given with
another policy ("reject", "cancel"), they were accepted when declared, and never asked:
the request was rejected at its timeout, though the access pages named them deputies. Now
the approval step or the tool approval is refused when declared, naming both options, and
nothing is declared."""

from datetime import timedelta

import pytest

from runs.definitions.definition import Workflow, tool_approval
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

DEPUTIES = ("group:finance-deputies",)


def snapshot(ctx):
    return {"order": ctx.input.order}


def unregistered():
    return Workflow("test-deputies", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("policy", ["reject", "cancel"])
def test_an_approval_step_with_deputies_and_no_escalation_is_refused(policy):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.approval("sign-off", approvers=("group:finance",), on_timeout=policy,
                          escalate_to=DEPUTIES)(snapshot)
    assert str(refused.value) == (
        "workflow test-deputies v1, step 'sign-off': escalate_to names who is asked when "
        f"on_timeout='escalate', and on_timeout is {policy!r}: declare "
        "on_timeout='escalate', or no escalate_to")
    assert workflow.steps == []


def test_a_tool_approval_with_deputies_and_its_default_policy_is_refused():
    # A tool approval's calls are declined at their timeout unless told to escalate.
    with pytest.raises(DefinitionError) as refused:
        tool_approval(approvers=("group:finance",), escalate_to=DEPUTIES)
    assert str(refused.value) == (
        "tool approval: escalate_to names who is asked when on_timeout='escalate', and "
        "on_timeout is 'reject': declare on_timeout='escalate', or no escalate_to")


def test_deputies_with_the_escalate_policy_are_declared():
    step = unregistered().approval("sign-off", approvers=("group:finance",),
                                   timeout=timedelta(days=1), escalate_to=DEPUTIES)(snapshot)
    assert (step.approval.on_timeout, step.approval.escalate_to) == ("escalate", DEPUTIES)
    policy = tool_approval(approvers=("group:finance",), on_timeout="escalate",
                           escalate_to=DEPUTIES)
    assert policy.escalate_to == DEPUTIES
