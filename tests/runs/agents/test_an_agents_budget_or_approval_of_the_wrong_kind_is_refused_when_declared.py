"""An agent's `budget` is an AgentBudget and its or a tool's `approval` a tool_approval(...).
A dict of the limits, or the approvers as a tuple, is refused when the module is imported,
with a DefinitionError naming the workflow, the step (and the tool), and declares nothing.
Accepted, the budget failed at the run's first model turn, and the approvers only once a
call first waited for a person."""

import pytest
from pydantic import BaseModel

from runs.definitions.definition import AgentBudget, Workflow, tool_approval
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


class NoteArgs(BaseModel):
    text: str


def write_note(ctx, args):
    return {"note": args.text}


def unregistered():
    return Workflow("test-agent-kinds", version=1, input=OrderIn, register=False)


def test_a_budget_given_as_a_dict_is_refused():
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.agent("assist", system_prompt="Take notes.", budget={"max_turns": 3})
    assert str(refused.value) == (
        "workflow test-agent-kinds v1, step 'assist': budget must be an AgentBudget "
        "(budget=AgentBudget(max_turns=...)), not dict")
    assert workflow.steps == []


def test_an_agents_approvers_given_as_a_tuple_are_refused():
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.agent("assist", system_prompt="Take notes.", approval=("group:finance",))
    assert str(refused.value) == (
        "workflow test-agent-kinds v1, step 'assist': approval must be "
        "tool_approval(approvers=...), not tuple")
    assert workflow.steps == []


def test_a_tools_approvers_given_as_a_tuple_are_refused():
    agent = unregistered().agent("assist", system_prompt="Take notes.")
    with pytest.raises(DefinitionError) as refused:
        agent.tool("note", kind="write", impact="high", args=NoteArgs,
                   approval=("group:finance",))(write_note)
    assert str(refused.value) == (
        "workflow test-agent-kinds v1, step 'assist', tool 'note': approval must be "
        "tool_approval(approvers=...), not tuple")
    assert agent.tools == {}


def test_a_budget_and_approvals_of_their_kinds_are_declared():
    agent = unregistered().agent("assist", system_prompt="Take notes.",
                                 budget=AgentBudget(max_turns=3),
                                 approval=tool_approval(approvers=("group:finance",)))
    agent.tool("note", kind="write", impact="high", args=NoteArgs)(write_note)
    assert agent.budget.max_turns == 3
    assert agent.tools["note"].approval_policy.approvers == ("group:finance",)


def test_a_budget_of_part_turns_is_refused():
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.agent("assist", system_prompt="Take notes.", budget=AgentBudget(max_turns=2.5))
    assert str(refused.value) == (
        "workflow test-agent-kinds v1, step 'assist': its budget's max_turns must be a whole "
        "number >= 1, not 2.5")
    assert workflow.steps == []


@pytest.mark.parametrize("per_turn", [0, -1, 1.5, "3", True])
def test_a_bound_on_calls_per_turn_that_is_no_whole_number_from_one_is_refused(per_turn):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.agent("assist", system_prompt="Take notes.",
                       budget=AgentBudget(max_calls_per_turn=per_turn))
    assert str(refused.value) == (
        "workflow test-agent-kinds v1, step 'assist': its budget's max_calls_per_turn must be "
        f"a whole number >= 1, not {per_turn!r}")
    assert workflow.steps == []
