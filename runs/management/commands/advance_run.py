from django.core.management.base import BaseCommand, CommandError

from runs.execution.executor import advance_run
from runs.machine.storable import NotAnId, id_written
from runs.models import Run


class Command(BaseCommand):
    help = ("Advance one run as a worker would: claim it and run it until it completes, "
            "waits or needs a person. A run another worker holds is left alone.")

    def add_arguments(self, parser):
        # Read as text: int() reads "٢" as 2, where the API and the console read no number.
        parser.add_argument("run_id")

    def handle(self, *args, run_id, **options):
        try:
            run_id = id_written(run_id, name="run id", thing="run")
        except NotAnId as exc:
            raise CommandError(str(exc)) from None
        status = advance_run(run_id)
        # Not claimable covers "no such run" too: tell the two apart only then, one query.
        if status is None and not Run.objects.filter(pk=run_id).exists():
            raise CommandError(f"no run {run_id}")
        self.stdout.write(f"run {run_id}: {status or 'not claimable now'}")
