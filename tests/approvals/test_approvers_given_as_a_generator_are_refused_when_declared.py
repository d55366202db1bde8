"""Approvers given as a generator (`approvers=(f"user:{u}" for u in TEAM)`) passed the
declaration's checks, which read them to the end: the approval step, or the tool approval,
then kept no approver at all, and its requests asked nobody. Now such approvers (or
escalate_to) are refused when declared, naming where and what was given; a tuple, a list
or a set are kept whole."""

import pytest

from runs.definitions.definition import Workflow, tool_approval
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

TEAM = ("ann", "bob")


def snapshot(ctx):
    return {"order": ctx.input.order}


def unregistered():
    return Workflow("test-approvers", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("option", ["approvers", "escalate_to"])
def test_a_step_given_a_generator_is_refused_and_declares_nothing(option):
    workflow = unregistered()
    given = {"approvers": ("group:finance",), "escalate_to": ("group:deputies",),
             option: (f"user:{name}" for name in TEAM)}
    with pytest.raises(DefinitionError) as refused:
        workflow.approval("sign-off", **given)(snapshot)
    assert str(refused.value) == (
        "workflow test-approvers v1, step 'sign-off': approvers and escalate_to are tuples: "
        "write (\"group:finance\",), not generator")
    assert workflow.steps == []


def test_a_tool_approval_given_a_generator_is_refused():
    with pytest.raises(DefinitionError, match="^tool approval: approvers and escalate_to are "
                                              "tuples: .*, not generator$"):
        tool_approval(approvers=(f"user:{name}" for name in TEAM))


@pytest.mark.parametrize("approvers", [
    [f"user:{name}" for name in TEAM], tuple(f"user:{name}" for name in TEAM)])
def test_a_list_or_a_tuple_is_kept_whole(approvers):
    workflow = unregistered()
    step = workflow.approval("sign-off", approvers=approvers, on_timeout="reject")(snapshot)
    assert step.approval.approvers == ("user:ann", "user:bob")
    assert tool_approval(approvers=approvers).approvers == ("user:ann", "user:bob")


def test_a_string_is_still_refused_as_one():
    with pytest.raises(DefinitionError, match="not a string$"):
        unregistered().approval("sign-off", approvers="group:finance",
                                on_timeout="reject")(snapshot)
