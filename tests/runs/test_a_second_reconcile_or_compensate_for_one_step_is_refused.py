"""A step or a tool declares how its effect is looked up by key (reconcile) and how it is
undone (compensate) once. A second declaration, a copy left behind by an edit or a function
meant for another step, replaced the first without a word, and the runtime then looked up
or undid the effect with a function nobody reviewed for it: it is refused when the module is
imported, naming the workflow, the step (and the tool), and the first stays."""

import pytest
from pydantic import BaseModel

from runs.definitions.definition import Found, NotFound, Workflow
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


def post(ctx):
    return {}


def find_entry(ctx):
    return Found("L-1")


def find_nothing(ctx):
    return NotFound()


class NoteArgs(BaseModel):
    text: str


def unregistered():
    return Workflow("test-declared-once", version=1, input=OrderIn, register=False)


def test_a_second_reconcile_for_one_step_is_refused_and_the_first_stays():
    step = unregistered().write("post-ledger")(post)
    step.reconcile(find_entry)
    with pytest.raises(DefinitionError) as refused:
        step.reconcile(find_nothing)
    assert str(refused.value) == (
        "workflow test-declared-once v1, step 'post-ledger': its reconcile function is "
        "declared twice (find_entry, then find_nothing); a step has one")
    assert step.reconcile_fn is find_entry


def test_a_second_compensate_for_one_step_is_refused_and_the_first_stays():
    step = unregistered().write("post-ledger")(post)
    step.compensate(find_entry)
    with pytest.raises(DefinitionError, match="step 'post-ledger': its compensate function "
                                              "is declared twice"):
        step.compensate(find_nothing)
    assert step.compensate_fn is find_entry


def test_the_same_function_declared_again_is_refused_too():
    # Nothing would change, but the second decorator is a mistake all the same: the reader
    # of the module sees two declarations and cannot tell which one the runtime keeps.
    step = unregistered().write("post-ledger")(post)
    step.reconcile(find_entry)
    with pytest.raises(DefinitionError, match="declared twice"):
        step.reconcile(find_entry)


def test_a_second_reconcile_or_compensate_for_one_tool_is_refused():
    agent = unregistered().agent("assist", system_prompt="Take notes.")
    tool = agent.tool("note", kind="write", args=NoteArgs)(lambda ctx, args: {})
    first_lookup, first_undo = (lambda ctx, args: NotFound()), (lambda ctx, args: {})
    tool.reconcile(first_lookup)
    tool.compensate(first_undo)
    place = "workflow test-declared-once v1, step 'assist', tool 'note': "
    with pytest.raises(DefinitionError) as refused:
        tool.reconcile(lambda ctx, args: Found("N-1"))
    assert str(refused.value).startswith(place + "its reconcile function is declared twice")
    with pytest.raises(DefinitionError) as refused:
        tool.compensate(lambda ctx, args: {})
    assert str(refused.value).startswith(place + "its compensate function is declared twice")
    assert (tool.reconcile_fn, tool.compensate_fn) == (first_lookup, first_undo)


def describe_posting(ctx):
    return "post to the ledger"


def describe_payment(ctx):
    return "pay the vendor"


@pytest.mark.parametrize("declaration", ["describe", "compensation_preview"])
def test_a_second_description_or_undo_preview_for_one_step_is_refused(declaration):
    # What people are shown before they approve or undo: two of them, and they would read
    # the one the runtime dropped.
    step = unregistered().write("post-ledger")(post)
    getattr(step, declaration)(describe_posting)
    with pytest.raises(DefinitionError, match="step 'post-ledger': its .* is declared twice "
                                              r"\(describe_posting, then describe_payment\)"):
        getattr(step, declaration)(describe_payment)
    assert getattr(step, f"{declaration}_fn") is describe_posting


def test_a_second_prompt_for_one_agent_is_refused_and_a_prompt_the_worker_cannot_call_too():
    agent = unregistered().agent("assist", system_prompt="Take notes.")
    agent.prompt(describe_posting)
    with pytest.raises(DefinitionError, match="step 'assist': its prompt function is "
                                              "declared twice"):
        agent.prompt(describe_payment)
    assert agent.prompt_fn is describe_posting
    other = unregistered().agent("assist", system_prompt="Take notes.")
    with pytest.raises(DefinitionError, match="step 'assist': its prompt function"):
        other.prompt(lambda: "no ctx")
