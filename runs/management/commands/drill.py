from django.core.management.base import BaseCommand, CommandError

from runs.definition import registry
from runs.drills import approval_path, run_drills
from runs.management.tables import render_table


class Command(BaseCommand):
    help = ("Run the crash drills (1, 2, 5, 8 and, with compensation, 6) against a registered "
            "workflow and print drill / expected / observed / pass. Exits non-zero if one fails.")

    def add_arguments(self, parser):
        parser.add_argument("workflow")

    def handle(self, *args, workflow, **options):
        definition = registry.latest(workflow)
        if definition is None:
            raise CommandError(f"unknown workflow {workflow!r}; registered: "
                               f"{', '.join(registry.names()) or 'none'}")
        try:
            results = run_drills(definition)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        rows = [(r.drill, r.expected, r.observed,
                 "n/a" if r.passed is None else ("PASS" if r.passed else "FAIL"))
                for r in results]
        self.stdout.write(f"drills for {definition.name} v{definition.version}")
        self.stdout.write(render_table(("drill", "expected", "observed", "pass"), rows))
        self.stdout.write(f"approvals: {approval_path()}")
        failed = [r.drill for r in results if r.passed is False]
        if failed:
            raise CommandError(f"{len(failed)} drill(s) failed: {'; '.join(failed)}")
        self.stdout.write("all applicable drills passed")
