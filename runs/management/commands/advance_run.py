from django.core.management.base import CommandError

from audit.arguments import ValuesCutShortCommand
from runs.execution.executor import advance_run
from runs.machine.storable import NotAnId, id_written
from runs.models import Run


class Command(ValuesCutShortCommand):
    help = ("Advance one run as a worker would: claim it and run it until it completes, "
            "waits or needs a person. A run another worker holds is left alone.")

    def add_arguments(self, parser):
        # Read as text: int() reads "٢" as 2, where the API and the console read no number.
        parser.add_argument("run_id")
        parser.add_argument("--drill", action="store_true",
                            help="advance a drill run, as the drill kit does (workers and "
                                 "this command without it leave drill runs alone)")

    def handle(self, *args, run_id, drill, **options):
        try:
            run_id = id_written(run_id, name="run id", thing="run")
        except NotAnId as exc:
            raise CommandError(str(exc)) from None
        status = advance_run(run_id, drill=drill)
        # Not claimable covers "no such run" and the other kind of run too: told apart only
        # then, one query.
        if status is None:
            run = Run.objects.filter(pk=run_id).only("drill").first()
            if run is None:
                raise CommandError(f"no run {run_id}")
            if run.drill != drill:
                raise CommandError(
                    f"run {run_id} is a drill run: only the drill advances it (--drill)"
                    if run.drill else f"run {run_id} is no drill run: --drill advances drill "
                    "runs only")
        self.stdout.write(f"run {run_id}: {status or 'not claimable now'}")
