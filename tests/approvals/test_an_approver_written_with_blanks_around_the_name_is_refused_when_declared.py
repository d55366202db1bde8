"""An approver is looked up by the name as it is written. One written with blanks around
the name ("user: ann", "group:finance ") was accepted when declared, and asked nobody: the
request, once open, only recorded an unknown user ' ann'. Now such an approver (or one in
escalate_to) is refused when declared, for an approval step and a tool approval alike,
naming where, what was given and what was meant, and nothing is declared. A blank inside a
name (a group "finance deputies") is a name's own."""

import pytest

from runs.definitions.definition import Workflow, tool_approval
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


def snapshot(ctx):
    return {"order": ctx.input.order}


def unregistered():
    return Workflow("test-approver-blanks", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("given, meant", [
    ("user: ann", "user:ann"), ("group:finance ", "group:finance"),
    (" user:ann", "user:ann"), ("group :finance", "group:finance"),
])
@pytest.mark.parametrize("option", ["approvers", "escalate_to"])
def test_a_step_given_an_approver_with_blanks_is_refused_and_declares_nothing(
        option, given, meant):
    workflow = unregistered()
    options = {"approvers": ("group:finance",), "escalate_to": ("group:deputies",),
               option: ("user:bob", given)}
    with pytest.raises(DefinitionError) as refused:
        workflow.approval("sign-off", **options)(snapshot)
    assert str(refused.value) == (
        f"workflow test-approver-blanks v1, step 'sign-off': {given!r} has blanks around its "
        f"name, which no user or group is named with: write {meant!r}")
    assert workflow.steps == []


def test_a_tool_approval_given_an_approver_with_blanks_is_refused():
    with pytest.raises(DefinitionError) as refused:
        tool_approval(approvers=("user: ann",))
    assert str(refused.value) == ("tool approval: 'user: ann' has blanks around its name, "
                                  "which no user or group is named with: write 'user:ann'")


def test_a_name_with_a_blank_inside_it_is_declared():
    step = unregistered().approval("sign-off", approvers=("group:finance deputies",),
                                   on_timeout="reject")(snapshot)
    assert step.approval.approvers == ("group:finance deputies",)
