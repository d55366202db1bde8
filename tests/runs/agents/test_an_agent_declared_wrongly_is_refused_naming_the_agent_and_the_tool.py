"""An agent step or one of its tools declared wrongly fails when its module is imported, with
a DefinitionError naming the workflow, the agent step and the tool, and declares nothing.
Left to run time, each would fail in a worker once the model chose the tool (a function
that cannot take (ctx, args)), or never (a coroutine stored as a tool's result, a lookup
budget of 0 that asks a person at the first unknown outcome), or send the model a system
prompt that says nothing. A tool call is an effect as a step is: its options are held to a
write step's rules."""

import pytest
from pydantic import BaseModel

from runs.definitions.definition import Workflow, tool_approval
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


class NoteArgs(BaseModel):
    text: str


def write_note(ctx, args):
    return {"note": args.text}


async def write_note_async(ctx, args):
    return {"note": args.text}


def unregistered_agent():
    workflow = Workflow("test-agent-mistakes", version=1, input=OrderIn, register=False)
    return workflow.agent("assist", system_prompt="Take notes.")


PLACE = "workflow test-agent-mistakes v1, step 'assist', tool 'note': "


@pytest.mark.parametrize("function, why", [
    ("write_note", "its function must be callable, not str"),
    (None, "its function must be callable, not NoneType"),
    (lambda ctx: None, "its function (ctx) cannot be called as (ctx, args)"),
    (lambda ctx, args, extra: None, "its function (ctx, args, extra) cannot be called as "
                                    "(ctx, args)"),
    (write_note_async, "its function is async"),
])
def test_a_tool_function_the_worker_cannot_call_is_refused_when_decorated(function, why):
    agent = unregistered_agent()
    with pytest.raises(DefinitionError) as refused:
        agent.tool("note", kind="write", args=NoteArgs)(function)
    assert str(refused.value).startswith(PLACE + why)
    assert agent.tools == {}


@pytest.mark.parametrize("options, why", [
    ({"lookup_attempts": 0}, "lookup_attempts must be a whole number >= 1, not 0"),
    ({"lookup_attempts": 2.5}, "lookup_attempts must be a whole number >= 1, not 2.5"),
    ({"lookup_attempts": True}, "lookup_attempts must be a whole number >= 1, not True"),
    ({"lookup_delay": -5}, "lookup_delay must be a finite number of seconds >= 0, not -5"),
    ({"lookup_delay": float("inf")}, "lookup_delay must be a finite number of seconds >= 0"),
    ({"lookup_delay": "10"}, "lookup_delay must be a finite number of seconds >= 0"),
    ({"retry": {"maximum_attempts": 3}}, "retry must be a RetryPolicy, not dict"),
    ({"redact": "iban"}, "redact names fields: write redact=('iban',)"),
    ({"approve_if": True}, "its approve_if must be callable, not bool"),
    ({"approve_if": lambda: True}, "its approve_if () cannot be called as (args)"),
])
def test_a_tool_option_the_runtime_cannot_apply_is_refused_naming_the_tool(options, why):
    agent = unregistered_agent()
    agent.approval = tool_approval(approvers=("group:ops",))
    with pytest.raises(DefinitionError) as refused:
        agent.tool("note", kind="write", args=NoteArgs, **options)(write_note)
    assert str(refused.value).startswith(PLACE + why)
    assert agent.tools == {}


@pytest.mark.parametrize("declare, why", [
    (lambda tool: tool.reconcile("find_note"), "its reconcile function must be callable"),
    (lambda tool: tool.reconcile(lambda ctx: None),
     "its reconcile function (ctx) cannot be called as (ctx, args)"),
    (lambda tool: tool.compensate(write_note_async), "its compensate function is async"),
])
def test_a_tool_recovery_function_the_worker_cannot_call_is_refused(declare, why):
    agent = unregistered_agent()
    tool = agent.tool("note", kind="write", args=NoteArgs)(write_note)
    with pytest.raises(DefinitionError) as refused:
        declare(tool)
    assert str(refused.value).startswith(PLACE + why)
    assert (tool.reconcile_fn, tool.compensate_fn, agent.compensate_fn) == (
        None, None, None)


@pytest.mark.parametrize("prompt, why", [
    ("", "its system prompt is empty"),
    ("  \n\t ", "its system prompt is empty"),
    (None, "its system prompt must be text, not NoneType"),
    (("Take notes.",), "its system prompt must be text, not tuple"),
])
def test_an_agent_whose_system_prompt_says_nothing_is_refused_and_not_added(prompt, why):
    workflow = Workflow("test-agent-mistakes", version=1, input=OrderIn, register=False)
    with pytest.raises(DefinitionError) as refused:
        workflow.agent("assist", system_prompt=prompt)
    assert str(refused.value).startswith("workflow test-agent-mistakes v1, step 'assist': "
                                         + why)
    assert workflow.steps == []


def test_a_correct_agent_and_its_tools_are_declared():
    agent = unregistered_agent()
    note = agent.tool("note", kind="write", args=NoteArgs, lookup_delay=0, lookup_attempts=1,
                      redact=["text"], approve_if=lambda args: False,
                      approval=tool_approval(approvers=("group:ops",)))(write_note)
    note.reconcile(lambda ctx, args, extra=None: None)
    note.compensate(write_note)
    read = agent.tool("read", args=NoteArgs)(lambda ctx, args: args.text)
    assert list(agent.tools) == ["note", "read"]
    assert note.redact == ("text",)
    assert read.fn(None, NoteArgs(text="x")) == "x"
