import json

from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from audit.chain import Actor
from runs.definitions.definition import registry
from runs.machine.errors import StartRefused
from runs.machine.storable import NotFinite, TooManyDigits, finite_json, unstorable_texts
from runs.machine.transitions import start_run


class Command(ValuesCutShortCommand):
    help = ("Start a run of WORKFLOW for BUSINESS_KEY with --input JSON. Delivering the same "
            "start twice finds the existing run.")

    def add_arguments(self, parser):
        parser.add_argument("workflow")
        parser.add_argument("business_key")
        parser.add_argument("--input", default="{}", help="the run's input as a JSON object")

    def handle(self, *args, workflow, business_key, input, **options):
        try:
            data = finite_json(input)
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not valid JSON: {exc}") from None
        except TooManyDigits as exc:
            raise CommandError(f"--input holds {exc}; nothing was started") from None
        except RecursionError:
            raise CommandError("--input is nested too deeply to read as JSON") from None
        except NotFinite as exc:
            raise CommandError(f"--input holds {exc.texts[0]}, not a finite number (JSON has no "
                               "NaN or Infinity, and one too large for a float is read as "
                               "infinity); nothing was started") from None
        if not isinstance(data, dict):
            raise CommandError("--input must be a JSON object")
        definition = registry.latest(workflow)
        if definition is not None:
            # Read as the API reads a start's input: JSON's types as the schema declares
            # them ("5" is no integer), so a script and an integrator are told the same.
            # Text that is not Unicode is named where it is, as the API names it: the strict
            # reading would only say its JSON is invalid.
            problems = [e for e in unstorable_texts(data, []) if e["type"] == "string_unicode"]
            problems = problems or definition.strict_input(data)[1]
            if problems:
                fields = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(input)'}: {e['msg']}"
                                   for e in problems)
                raise CommandError(f"--input for {workflow} does not match its schema: "
                                   f"{fields}; nothing was started")
        try:
            run, created = start_run(workflow=workflow, business_key=business_key, input=data,
                                     actor=Actor.system("start_run command"))
        except StartRefused as exc:
            raise CommandError(str(exc)) from None
        verb = "started" if created else "already exists:"
        self.stdout.write(f"{verb} run {run.pk} ({run.workflow_name} {run.business_key}) "
                          f"status {run.status}")
