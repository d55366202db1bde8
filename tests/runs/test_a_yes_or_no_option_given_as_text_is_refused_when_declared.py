"""`honours_key` and `auto_compensate` are read as a yes or a no. Given as text ("no",
"false", copied from a settings file) or a number, they were accepted and read by their
truth: honours_key="no" said the receiver deduplicates on the key, so after an unknown
outcome the runtime sent the effect again to a receiver that does not; auto_compensate="no"
undid a failed run's steps without a person. Now each is refused when declared, naming the
workflow, the step or tool, the option and what was given, and nothing is declared."""

import pytest
from pydantic import BaseModel

from runs.definitions.definition import WRITE, Workflow, registry
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

AT = "workflow test-yes-or-no v1"


class NoteArgs(BaseModel):
    text: str


def send(ctx):
    return {"sent": True}


def unregistered():
    return Workflow("test-yes-or-no", version=1, input=OrderIn, register=False)


@pytest.mark.parametrize("given", ["no", "false", 0, None])
@pytest.mark.parametrize("kind", ["write", "notify"])
def test_a_steps_honours_key_given_as_anything_but_true_or_false_is_refused(kind, given):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        getattr(workflow, kind)("charge", honours_key=given)(send)
    assert str(refused.value) == (f"{AT}, step 'charge': honours_key must be True or False, "
                                  f"not {given!r}")
    assert workflow.steps == []


def test_a_tools_honours_key_given_as_text_is_refused():
    agent = unregistered().agent("assist", system_prompt="Take notes.")
    with pytest.raises(DefinitionError) as refused:
        agent.tool("note", kind=WRITE, args=NoteArgs, honours_key="no")(
            lambda ctx, args: {"note": args.text})
    assert str(refused.value) == (f"{AT}, step 'assist', tool 'note': honours_key must be "
                                  "True or False, not 'no'")
    assert agent.tools == {}


@pytest.mark.parametrize("given", ["no", 1])
def test_auto_compensate_given_as_anything_but_true_or_false_is_refused(given):
    with pytest.raises(DefinitionError) as refused:
        Workflow("test-yes-or-no", version=1, input=OrderIn, auto_compensate=given)
    assert str(refused.value) == f"{AT}: auto_compensate must be True or False, not {given!r}"
    assert registry.get("test-yes-or-no", 1) is None


@pytest.mark.parametrize("given", [True, False])
def test_true_and_false_are_declared(given):
    workflow = Workflow("test-yes-or-no", version=1, input=OrderIn, register=False,
                        auto_compensate=given)
    assert workflow.write("charge", honours_key=given)(send).honours_key is given
    assert workflow.auto_compensate is given
