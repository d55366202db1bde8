"""Declaring a step asks whether its name is taken without a pass over every step declared
before it: validation.check_unique_name searched the workflow's list for each new step, so
a workflow of 20,000 steps was slow to import, quadratic in its steps. It now asks the
workflow's table of steps by name (runs/definitions/step_index.py), which the steps declared
since are added to. Measured by the lines of the runtime's code executed (runs/), not by
time; a name declared twice is still refused, also once the list was changed in place."""

import dataclasses

import pytest
from pydantic import BaseModel

from runs.definitions.definition import Workflow
from runs.definitions.validation import DefinitionError
from tests.line_counts import lines_of_runtime_code


class ManyIn(BaseModel):
    order: str


def _declared(name: str, steps: int) -> Workflow:
    # Not registered: a Workflow is registered by the registry, not by being made.
    workflow = Workflow(name, version=1, input=ManyIn)
    for position in range(steps):
        workflow.read(f"s{position}")(lambda ctx, i=position: {"i": i})
    return workflow


def test_ten_times_the_steps_cost_about_ten_times_the_work():
    short, short_lines = lines_of_runtime_code(lambda: _declared("test-many-short", 200))
    long, long_lines = lines_of_runtime_code(lambda: _declared("test-many-long", 2000))
    assert len(short.steps) == 200 and len(long.steps) == 2000
    # 29,570 lines against 297,967 (10 times). It was 49 times (46,672 against 2,268,969)
    # while each declaration searched the steps before it.
    assert long_lines < 15 * short_lines, (short_lines, long_lines)


def test_a_name_declared_twice_is_refused_wherever_it_stands():
    workflow = _declared("test-many-twice", 50)
    with pytest.raises(DefinitionError, match="declared twice"):
        workflow.read("s0")(lambda ctx: {})
    with pytest.raises(DefinitionError, match="declared twice"):
        workflow.read("s49")(lambda ctx: {})
    # A step renamed in place (as a test plays a release) takes its new name and frees its
    # old one; steps moved about are still found.
    workflow.steps[10] = dataclasses.replace(workflow.steps[10], name="renamed")
    with pytest.raises(DefinitionError, match="declared twice"):
        workflow.read("renamed")(lambda ctx: {})
    workflow.steps.insert(3, workflow.steps.pop())
    with pytest.raises(DefinitionError, match="declared twice"):
        workflow.read("s49")(lambda ctx: {})
    workflow.read("s10")(lambda ctx: {})
    assert [s.name for s in workflow.steps].count("s10") == 1
    assert workflow.step("renamed").name == "renamed" and workflow.step("s10").name == "s10"
