"""The catalogue of workflow definitions (runs.definitions.definition.Workflow) by name and version:
old versions stay registered while runs on them are open. runs.definitions.definition names it as
its own (`d.registry`)."""

from collections.abc import Callable
from typing import Any

from . import validation


class Registry:
    """Maps (workflow name, version) to definitions. Old versions stay registered while
    runs on them are open."""

    def __init__(self):
        self._workflows: dict[tuple[str, int], Any] = {}
        self._checks: list[Callable[[Any], None]] = []

    def check_each(self, check: Callable[[Any], None]) -> None:
        """Call `check(workflow)` before each workflow is registered from now on; what it
        raises refuses the workflow, which is then not registered. What depends on the next
        version of a workflow, and lives above this module (a schedule's fixed input,
        runs.waiting.schedule_input), holds the version to it without being imported here."""
        self._checks.append(check)

    def register(self, workflow) -> None:
        key = (workflow.name, workflow.version)
        if key in self._workflows and self._workflows[key] is not workflow:
            # Runs pin a version: one of the two would run the other's steps.
            raise validation.DefinitionError(
                f"{validation.where(workflow)}: {workflow.name} v{workflow.version} registered "
                "twice (give the new declaration a new version)")
        for check in self._checks:
            check(workflow)
        self._workflows[key] = workflow

    def unregister(self, workflow) -> None:
        self._workflows.pop((workflow.name, workflow.version), None)

    def get(self, name: str, version: int) -> Any:
        return self._workflows.get((name, version))

    def latest(self, name: str) -> Any:
        versions = [v for (n, v) in self._workflows if n == name]
        return self._workflows[(name, max(versions))] if versions else None

    def names(self) -> list[str]:
        return sorted({n for (n, _) in self._workflows})

    def versions(self, name: str) -> list:
        return [w for (n, _), w in sorted(self._workflows.items()) if n == name]

    def keys(self) -> frozenset:
        return frozenset(self._workflows)

    def check_declared(self, *, known: frozenset = frozenset()) -> None:
        """Refuse, naming it, a workflow registered since `known` (keys()) that declares no
        steps: called once the workflow modules are imported (runs.apps), since a module
        declares a workflow's steps after the workflow itself. Only those the imports
        registered: a workflow a running process builds on its own (a test's) is its
        caller's, and Django may run the apps' start again in a process long started."""
        for key, workflow in self._workflows.items():
            if key not in known:
                validation.check_declares_steps(workflow)


registry = Registry()
