"""Every mistake in a workflow's declaration is refused where it is declared with a
DefinitionError whose message starts with where it is: the workflow and its version, the step,
and for an agent's tool the tool. A plain ValueError or TypeError naming only the sleep, the
event wait or the tool left a person to find which workflow of many was meant; a `services`
that cannot be called, or an `example` its own schema refuses, was accepted and failed only
at the first run or drill. Refused, the mistake declares nothing: no step, no function on
a step, no tool, no registered workflow."""

from datetime import timedelta

import pytest
from pydantic import BaseModel

from runs.definitions.definition import AgentBudget, Workflow, registry
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

NAME = "test-refusals"
AT = f"workflow {NAME} v1"


class NoteArgs(BaseModel):
    text: str


def fetch(ctx):
    return {"ok": True}


def write_note(ctx, args):
    return {"note": args.text}


def unregistered():
    return Workflow(NAME, version=1, input=OrderIn, register=False)


def agent():
    return unregistered().agent("assist", system_prompt="Take notes.")


def with_tool(**options):
    assist = agent()
    assist.tool("note", args=NoteArgs, **options)(write_note)
    return assist


def workflow_with(**options):
    return lambda _: Workflow(NAME, version=1, input=OrderIn, **options)


# (what is declared first, the mistake made on it, where the refusal says it is)
CASES = {
    "a sleep with neither duration nor until": (
        unregistered, lambda w: w.sleep("nap"), f"{AT}, step 'nap': give either"),
    "a sleep with both duration and until": (
        unregistered, lambda w: w.sleep("nap", duration=timedelta(hours=1),
                                        until=lambda data: None),
        f"{AT}, step 'nap': give either"),
    "an event wait for an event with no name": (
        unregistered, lambda w: w.wait_for_event("paid", event=""),
        f"{AT}, step 'paid': name the event"),
    "an event wait for an event named with ':'": (
        unregistered, lambda w: w.wait_for_event("paid", event="psp:paid"),
        f"{AT}, step 'paid': the event's name 'psp:paid' may not contain ':'"),
    "an event wait with an unknown timeout policy": (
        unregistered, lambda w: w.wait_for_event("paid", event="paid", on_timeout="wait"),
        f"{AT}, step 'paid': on_timeout must be one of fail, escalate, continue"),
    "a reconcile function on a read step": (
        lambda: unregistered().read("fetch")(fetch), lambda s: s.reconcile(fetch),
        f"{AT}, step 'fetch': only write and notify steps reconcile; its kind is read"),
    "a compensate function on a decision step": (
        lambda: unregistered().decision("classify", schema=OrderIn)(fetch),
        lambda s: s.compensate(fetch),
        f"{AT}, step 'classify': only write and notify steps compensate; its kind is decision"),
    "a compensation preview on an approval step": (
        lambda: unregistered().approval("sign-off", approvers=("group:finance",),
                                           on_timeout="reject")(fetch),
        lambda s: s.compensation_preview(fetch),
        f"{AT}, step 'sign-off': only write and notify steps compensate; its kind is approval"),
    "an agent's negative schema_error_budget": (
        unregistered, lambda w: w.agent("assist", system_prompt="x", schema_error_budget=-1),
        f"{AT}, step 'assist': schema_error_budget must be a whole number >= 0, not -1"),
    "an agent's negative context_budget": (
        unregistered, lambda w: w.agent("assist", system_prompt="x", context_budget=-5),
        f"{AT}, step 'assist': context_budget must be a whole number >= 0, not -5"),
    "an agent's budget of no turns": (
        unregistered,
        lambda w: w.agent("assist", system_prompt="x", budget=AgentBudget(max_turns=0)),
        f"{AT}, step 'assist': its budget's max_turns must be a whole number >= 1, not 0"),
    "a tool's name with a space": (
        agent, lambda a: a.tool("post note", args=NoteArgs)(write_note),
        f"{AT}, step 'assist', tool 'post note': its name must be 1-64 letters"),
    "a tool declared twice": (
        lambda: with_tool(), lambda a: a.tool("note", args=NoteArgs)(write_note),
        f"{AT}, step 'assist', tool 'note': declared twice"),
    "a tool of a kind no tool has": (
        agent, lambda a: a.tool("note", kind="approval", args=NoteArgs)(write_note),
        f"{AT}, step 'assist', tool 'note': kind must be one of read, write, notify"),
    "a tool of an unknown impact": (
        agent, lambda a: a.tool("note", impact="HIGH", args=NoteArgs)(write_note),
        f"{AT}, step 'assist', tool 'note': impact must be one of low, high, not 'HIGH'"),
    "a tool whose arguments are no schema": (
        agent, lambda a: a.tool("note", args=dict)(write_note),
        f"{AT}, step 'assist', tool 'note': args must be a pydantic model class"),
    "a high-impact tool nobody approves": (
        agent, lambda a: a.tool("note", kind="write", impact="high", args=NoteArgs)(write_note),
        f"{AT}, step 'assist', tool 'note': its calls may wait for a person's approval"),
    "a reconcile function on a read tool": (
        lambda: with_tool(), lambda a: a.tools["note"].reconcile(write_note),
        f"{AT}, step 'assist', tool 'note': only write and notify tools reconcile"),
    "a negative retention": (
        lambda: None, workflow_with(retention_days=-1),
        f"{AT}: retention_days must be a whole number of days, 0 or more, not -1"),
    "a retention given as text": (
        lambda: None, workflow_with(retention_days="30"),
        f"{AT}: retention_days must be a whole number of days, 0 or more, not '30'"),
    "services that cannot be called": (
        lambda: None, workflow_with(services=object()),
        f"{AT}: services must be a function building the clients, not object"),
    "an example its input schema refuses": (
        lambda: None, workflow_with(example={"amount": 5}),
        f"{AT}: example is no valid input: order: Field required"),
    "an approval example of the wrong type": (
        lambda: None, workflow_with(approval_example={"order": "o-1", "amount": "many"}),
        f"{AT}: approval_example is no valid input: amount: "),
    "the same name and version registered twice": (
        lambda: Workflow(NAME, version=1, input=OrderIn),
        lambda first: Workflow(NAME, version=1, input=OrderIn),
        f"{AT}: {NAME} v1 registered twice"),
}


def declared(made) -> list:
    """What a refused mistake must have left as it was: the workflow's steps with their
    functions, an agent's tools, and what the registry holds under the name."""
    steps = made.workflow.steps if hasattr(made, "workflow") else getattr(made, "steps", [])
    return [registry.get(NAME, 1), *[(s.name, s.reconcile_fn, s.compensate_fn,
                                      s.compensation_preview_fn, dict(getattr(s, "tools", {})))
                                     for s in steps]]


@pytest.mark.parametrize("setup, mistake, place", CASES.values(), ids=CASES.keys())
def test_the_mistake_is_refused_naming_where_it_is(setup, mistake, place):
    made = setup()
    try:
        before = declared(made)
        with pytest.raises(DefinitionError) as refused:
            mistake(made)
        assert str(refused.value).startswith(place), str(refused.value)
        assert declared(made) == before
    finally:
        if isinstance(made, Workflow):
            registry.unregister(made)
    assert registry.get(NAME, 1) is None
