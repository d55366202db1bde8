from django.core.management.base import BaseCommand, CommandError

from runs.execution.executor import advance_run
from runs.models import Run

# Run ids are PostgreSQL bigints: a larger number names no run (and the database would
# refuse to compare with it rather than answer "none").
LARGEST_RUN_ID = 2**63 - 1


class Command(BaseCommand):
    help = ("Advance one run as a worker would: claim it and run it until it completes, "
            "waits or needs a person. A run another worker holds is left alone.")

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)

    def handle(self, *args, run_id, **options):
        if not 1 <= run_id <= LARGEST_RUN_ID:
            raise CommandError(f"no run {run_id}")
        status = advance_run(run_id)
        # Not claimable covers "no such run" too: tell the two apart only then, one query.
        if status is None and not Run.objects.filter(pk=run_id).exists():
            raise CommandError(f"no run {run_id}")
        self.stdout.write(f"run {run_id}: {status or 'not claimable now'}")
