"""`@wf.read` (or write, notify) written without its call and name declared no step at all:
the function was taken for the step's name, and the decorator left in its place. The
workflow then ran without that step, silently. It is refused as the workflow is declared,
naming the function and the form to write."""

import pytest

from runs.definitions.definition import Workflow
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn


@pytest.mark.parametrize("kind", ["read", "write", "notify"])
def test_a_decorator_without_its_step_name_is_refused(kind):
    workflow = Workflow(f"test-unnamed-{kind}", version=1, input=OrderIn, register=False)
    with pytest.raises(DefinitionError, match=(
            rf"^workflow test-unnamed-{kind} v1: fetch_rates is declared with @{kind} and no "
            rf"step name: write @<workflow>\.{kind}\(\"name\", \.\.\.\)$")):

        @getattr(workflow, kind)
        def fetch_rates(ctx):
            return {}

    assert workflow.steps == []


def test_the_same_decorator_with_its_name_declares_the_step():
    workflow = Workflow("test-named-read", version=1, input=OrderIn, register=False)

    @workflow.read("fetch-rates")
    def fetch_rates(ctx):
        return {}

    assert [s.name for s in workflow.steps] == ["fetch-rates"]
