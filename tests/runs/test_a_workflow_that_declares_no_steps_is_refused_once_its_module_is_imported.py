"""A workflow that declares no steps is a mistake: every run of it was completed at once,
having done nothing, and shown as a success. A module declares a workflow's steps after the
workflow itself, so it cannot be refused as it is built; the registry refuses it, naming it,
once the workflow modules are imported (Registry.check_declared)."""

import importlib
from datetime import timedelta

import pytest

from runs.definitions.definition import Workflow
from runs.definitions.registry import Registry
from runs.definitions.validation import DefinitionError
from tests.workflows import OrderIn

# Every module of this repository that declares workflows: the demo's, the tests', the
# bench's (the drills run the demo's and the tests').
WORKFLOW_MODULES = ("demo.workflows", "demo.agent_workflow", "tests.workflows",
                    "tests.approvals.workflows", "runs.bench_workflows")


def fetch(ctx):
    return {}


def test_a_registered_workflow_with_no_steps_is_refused_naming_it():
    registry = Registry()
    declared = Workflow("test-declared", version=1, input=OrderIn, register=False)
    declared.read("fetch")(fetch)
    registry.register(declared)
    registry.register(Workflow("test-empty", version=2, input=OrderIn, register=False))
    with pytest.raises(DefinitionError) as refused:
        registry.check_declared()
    assert str(refused.value) == ("workflow test-empty v2: declares no steps; each of its "
                                  "runs would complete at once having done nothing")


def test_a_workflow_whose_steps_are_declared_after_it_passes():
    registry = Registry()
    workflow = Workflow("test-declared", version=1, input=OrderIn, register=False)
    registry.register(workflow)
    workflow.sleep("nap", duration=timedelta(seconds=1))
    registry.check_declared()


@pytest.mark.parametrize("module", WORKFLOW_MODULES)
def test_every_workflow_this_repository_declares_has_steps(module):
    registry = Registry()
    for value in vars(importlib.import_module(module)).values():
        if isinstance(value, Workflow):
            registry.register(value)
    assert registry.names()
    registry.check_declared()


def test_a_workflow_a_running_process_builds_is_its_own_when_the_apps_start_again():
    """Django runs the apps' start again when a test changes INSTALLED_APPS: a workflow a
    test built without steps (one whose step was refused) is not the imports' to check."""
    from django.apps import apps

    from runs.definitions.definition import Workflow
    from runs.definitions.registry import registry

    built = Workflow("test-built-here-without-steps", version=1, input=OrderIn)
    try:
        apps.get_app_config("runs").ready()
    finally:
        registry.unregister(built)
