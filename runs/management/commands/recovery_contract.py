from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from audit.quoting import quoted
from runs.definitions.contracts import (
    STOP,
    contract_table,
    effect_verdict,
    rules_without_function,
    workflow_verdict,
)
from runs.definitions.definition import registry
from runs.definitions.validation import VERSION_MAX
from runs.machine.storable import whole_number_argument, whole_number_in_range
from runs.management.tables import render_table

COLUMNS = [("step", "step"), ("side effect", "side_effect"), ("safe to re-run", "safe_to_rerun"),
           ("rule", "rule"), ("evidence", "evidence"), ("owner", "owner"),
           ("class", "classification")]


class Command(ValuesCutShortCommand):
    help = ("Print a workflow's recovery contract: per step what it changes, whether it is "
            "safe to re-run, the rule, the evidence and the owner; then the verdict, and "
            "each declared rule the step gives nothing to follow. Exit status: 0 once "
            "printed, whatever the verdict; with --strict, 3 when the verdict is stop; 1 "
            "for a workflow or version not registered here.")

    def add_arguments(self, parser):
        parser.add_argument("workflow")
        # Not type=int, which reads "٢" as 2 and "1_0" as 10: a version no one wrote.
        parser.add_argument("--workflow-version", type=whole_number_argument,
                            dest="workflow_version",
                            help="a registered version, 1 or more (default: latest)")
        parser.add_argument("--strict", action="store_true",
                            help="exit with status 3 when the verdict is stop (a CI gate: a "
                                 "write that nothing can settle after an unknown outcome)")

    def handle(self, *args, workflow, workflow_version=None, strict=False, **options):
        version = workflow_version
        # What a definition may declare as its version (validation.version_problem): -1 or 0
        # names none, and was looked up as "v-1" as if a version had gone missing. Said as
        # every command says a count out of its range.
        if version is not None:
            whole_number_in_range(version, option="--workflow-version", low=1,
                                  high=VERSION_MAX,
                                  then="leave it out for the latest version")
        definition = (registry.latest(workflow) if version is None
                      else registry.get(workflow, version))
        if definition is None:
            known = registry.versions(workflow)
            # A name this process knows with other versions: the versions are the answer the
            # definition_missing runbook looks for, not the other workflows' names.
            registered = (f"{workflow} versions registered here: "
                          f"{', '.join(str(w.version) for w in known)}" if known else
                          f"registered: {', '.join(registry.names()) or 'none'}")
            raise CommandError(f"unknown workflow {quoted(workflow)}"
                               f"{'' if version is None else f' v{version}'}; {registered}")
        rows = [[getattr(c, attr) for _, attr in COLUMNS] for c in contract_table(definition)]
        self.stdout.write(f"{definition.name} v{definition.version}\n")
        self.stdout.write(render_table(tuple(title for title, _ in COLUMNS), rows))
        verdict = workflow_verdict(definition)
        self.stdout.write(f"\nverdict: {verdict.decision}: {verdict.reason}")
        self.stdout.write(f"next action: {verdict.next_action}")
        # Enforced, not advisory: these wait for a person before each attempt.
        for step in definition.steps:
            effects = [(step.name, step), *((f"{step.name}/{name}", tool) for name, tool
                                            in getattr(step, "tools", {}).items())]
            for label, spec in effects:
                stop = effect_verdict(spec)
                if stop is not None:
                    self.stdout.write(f"{label}: {stop.decision}: a person approves each "
                                      f"attempt before it runs ({stop.reason})")
        for line in rules_without_function(definition):
            self.stdout.write(f"rule without a function: {line}")
        if strict and verdict.decision == STOP:
            # Not 1, which says the workflow could not be read: the contract was, and stops.
            raise CommandError(f"{definition.name} v{definition.version}: the verdict is stop "
                               f"(--strict): {verdict.next_action}", returncode=3)
