"""A step's and a tool's `system`, and an agent's `model_system`, name the remote system a
rate limit (runs.machine.limits.rate_limit) and a dispatch pause (runs.machine.dispatch)
find it by; an agent's `model` names the model its turns ask for. Each was taken as given:
system=("ledger",), or "ledger " with a blank, was declared and the steps ran, but no rate
limit and no pause declared for "ledger" ever matched them. Now a name that is not text,
is blank, or has blanks around it is refused when declared, naming the workflow, the step
(and the tool), the option and what was given, and nothing is declared; "" still declares
none (an agent's `model`: the installation's)."""

import pytest
from pydantic import BaseModel

from runs.definitions.definition import WRITE, Workflow
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

AT = "workflow test-system-names v1, step"
GIVEN = [
    (("ledger",), "system must be text, not ('ledger',)"),
    (None, "system must be text, not None"),
    ("   ", "system is blank ('   '): name it, or leave it unset"),
    ("ledger ", "system 'ledger ' starts or ends with blanks, so nothing named 'ledger' "
                "would match it"),
]


class NoteArgs(BaseModel):
    text: str


def send(ctx):
    return {"sent": True}


def unregistered():
    return Workflow("test-system-names", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("given, why", GIVEN)
@pytest.mark.parametrize("kind", ["read", "write", "notify"])
def test_a_steps_system_that_is_no_name_is_refused(kind, given, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        getattr(workflow, kind)("post", system=given)(send)
    assert str(refused.value) == f"{AT} 'post': {why}"
    assert workflow.steps == []


@pytest.mark.parametrize("given, why", GIVEN)
def test_a_tools_system_that_is_no_name_is_refused(given, why):
    agent = unregistered().agent("assist", system_prompt="Take notes.")
    with pytest.raises(DefinitionError) as refused:
        agent.tool("note", kind=WRITE, args=NoteArgs, system=given)(
            lambda ctx, args: {"note": args.text})
    assert str(refused.value) == f"{AT} 'assist', tool 'note': {why}"
    assert agent.tools == {}


@pytest.mark.parametrize("option", ["model", "model_system"])
@pytest.mark.parametrize("given, why", GIVEN)
def test_an_agents_model_or_model_system_that_is_no_name_is_refused(option, given, why):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.agent("assist", system_prompt="Take notes.", **{option: given})
    assert str(refused.value) == f"{AT} 'assist': {why.replace('system', option, 1)}"
    assert workflow.steps == []


def test_names_and_none_are_declared():
    workflow = unregistered()
    assert workflow.write("post", system="the ledger")(send).system == "the ledger"
    assert workflow.read("fetch")(send).system == ""
    agent = workflow.agent("assist", system_prompt="Take notes.", model="gpt-4o-mini",
                           model_system="openai")
    assert (agent.model, agent.model_system) == ("gpt-4o-mini", "openai")
    assert workflow.agent("plain", system_prompt="Take notes.").model == ""
