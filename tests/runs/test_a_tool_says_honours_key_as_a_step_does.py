"""A tool says its receiver honours keys with the word a step uses, `honours_key`. The
former spelling, `honours_keys`, is still taken, with a warning naming the tool; the two
spellings saying opposite things are refused as declared."""

import warnings

import pytest
from pydantic import BaseModel

from runs.definitions.definition import WRITE, Workflow
from runs.definitions.validation import DefinitionError


class In(BaseModel):
    order: str


class NoteArgs(BaseModel):
    text: str


def _note(ctx, args):
    return {"noted": args.text}


def _agent():
    return Workflow("test-honours-key", version=1, input=In, register=False).agent(
        "notes", system_prompt="Note.")


def test_a_tool_declared_with_honours_key_honours_keys_as_a_step_declared_so_does():
    agent = _agent()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tool = agent.tool("write-note", kind=WRITE, honours_key=True, args=NoteArgs)(_note)

    assert tool.honours_key is True
    assert agent.tools["write-note"].honours_key is True


def test_a_tool_left_silent_does_not_honour_keys():
    tool = _agent().tool("write-note", kind=WRITE, args=NoteArgs)(_note)

    assert tool.honours_key is False


def test_the_former_spelling_is_taken_with_a_warning_naming_the_tool():
    with pytest.warns(DeprecationWarning, match="tool 'write-note' of 'notes': honours_keys= "
                                                "is now spelt honours_key="):
        tool = _agent().tool("write-note", kind=WRITE, honours_keys=True, args=NoteArgs)(_note)

    assert tool.honours_key is True


def test_the_two_spellings_saying_opposite_things_are_refused_and_no_tool_is_declared():
    agent = _agent()
    with pytest.raises(DefinitionError, match="tool 'write-note' of 'notes': honours_key=True "
                                              "and honours_keys=False"):
        agent.tool("write-note", kind=WRITE, honours_key=True, honours_keys=False,
                   args=NoteArgs)

    assert "write-note" not in agent.tools
