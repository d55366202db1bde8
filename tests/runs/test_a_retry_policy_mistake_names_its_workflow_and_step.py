"""A RetryPolicy is built inline, as an argument of the step it is for, before that step
exists: its mistakes (no attempt allowed, a negative delay, a backoff that is no number) were
a ValueError raised as it was built, naming neither the workflow nor the step, and a person
with forty workflows had to search for it. The step it is given to now refuses it with a
DefinitionError naming the workflow, the step (and the tool), the field and its value, and
declares nothing. A policy used on its own refuses to compute a delay or a budget."""

import pytest
from pydantic import BaseModel

from runs.definitions.definition import Workflow
from runs.definitions.retry import RetryPolicy
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

NAME = "test-retry-mistake"
AT = f"workflow {NAME} v1"


class Verdict(BaseModel):
    ok: bool


class NoteArgs(BaseModel):
    text: str


def fetch(ctx):
    return {"ok": True}


def write_note(ctx, args):
    return {"note": args.text}


def unregistered():
    return Workflow(NAME, version=1, input=OrderIn, register=False)


# (how a step is declared with the policy, where the refusal says it is)
DECLARATIONS = {
    "read": (lambda w, p: w.read("fetch", retry=p)(fetch), f"{AT}, step 'fetch'"),
    "write": (lambda w, p: w.write("post", retry=p)(fetch), f"{AT}, step 'post'"),
    "notify": (lambda w, p: w.notify("mail", retry=p)(fetch), f"{AT}, step 'mail'"),
    "decision": (lambda w, p: w.decision("classify", schema=Verdict, retry=p)(fetch),
                 f"{AT}, step 'classify'"),
    "agent": (lambda w, p: w.agent("assist", system_prompt="Take notes.", retry=p),
              f"{AT}, step 'assist'"),
}


@pytest.mark.parametrize("kind", DECLARATIONS)
def test_a_step_given_a_policy_with_no_attempt_is_refused_naming_the_workflow_and_the_step(
        kind):
    declare, where = DECLARATIONS[kind]
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        declare(workflow, RetryPolicy(maximum_attempts=0))
    assert str(refused.value) == (f"{where}: retry policy: maximum_attempts must be >= 1, "
                                  "not 0")
    assert workflow.steps == []


def test_a_tool_given_a_wrong_policy_is_refused_naming_the_workflow_the_step_and_the_tool():
    assist = unregistered().agent("assist", system_prompt="Take notes.")
    with pytest.raises(DefinitionError) as refused:
        assist.tool("note", args=NoteArgs, retry=RetryPolicy(initial_interval=-1))(write_note)
    assert str(refused.value) == (f"{AT}, step 'assist', tool 'note': retry policy: "
                                  "initial_interval must be >= 0, not -1")
    assert assist.tools == {}


@pytest.mark.parametrize("options, said", [
    ({"initial_interval": -2.5}, "initial_interval must be >= 0, not -2.5"),
    ({"backoff_coefficient": "fast"}, "backoff_coefficient must be a finite number, not 'fast'"),
    ({"backoff_coefficient": 0.5}, "backoff_coefficient must be >= 1, not 0.5"),
    ({"maximum_elapsed": -60}, "maximum_elapsed must be > 0, not -60"),
    ({"jitter": 1.5}, "jitter must be in [0, 1), not 1.5"),
    ({"initial_interval": 10, "maximum_interval": 5},
     "maximum_interval must be >= initial_interval (10), not 5"),
    ({"maximum_attempts": 0, "jitter": -1},
     "maximum_attempts must be >= 1, not 0; jitter must be in [0, 1), not -1"),
])
def test_the_refusal_names_each_wrong_field_with_its_value(options, said):
    workflow = unregistered()
    with pytest.raises(DefinitionError) as refused:
        workflow.read("fetch", retry=RetryPolicy(**options))(fetch)
    assert str(refused.value) == f"{AT}, step 'fetch': retry policy: {said}"
    assert workflow.steps == []


def test_a_wrong_policy_shared_by_several_steps_is_refused_at_the_first_step_given_it():
    shared = RetryPolicy(maximum_attempts=0)  # a module's constant: built without a refusal
    workflow = unregistered()
    workflow.read("fetch")(fetch)
    with pytest.raises(DefinitionError, match=rf"^{AT}, step 'post': retry policy: "):
        workflow.write("post", retry=shared)(fetch)
    assert [step.name for step in workflow.steps] == ["fetch"]


def test_a_wrong_policy_used_on_its_own_refuses_to_compute_a_delay_or_a_budget():
    policy = RetryPolicy(maximum_attempts=0, initial_interval=float("nan"))
    for compute in (lambda: policy.delay(1), lambda: policy.base_delay(1),
                    lambda: policy.allows_another(attempts_made=0, elapsed=0, next_delay=1)):
        with pytest.raises(ValueError, match=r"^invalid RetryPolicy: initial_interval must be "
                                             r"a finite number, not nan$"):
            compute()


def test_a_sound_policy_is_kept_on_its_step():
    policy = RetryPolicy(maximum_attempts=3, initial_interval=0, jitter=0)
    step = unregistered().read("fetch", retry=policy)(fetch)
    assert step.retry is policy and policy.problem is None and policy.delay(2) == 0
