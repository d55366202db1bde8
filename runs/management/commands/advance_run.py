from django.core.management.base import BaseCommand

from runs.execution.executor import advance_run


class Command(BaseCommand):
    help = ("Advance one run as a worker would: claim it and run it until it completes, "
            "waits or needs a person. A run another worker holds is left alone.")

    def add_arguments(self, parser):
        parser.add_argument("run_id", type=int)

    def handle(self, *args, run_id, **options):
        status = advance_run(run_id)
        self.stdout.write(f"run {run_id}: {status or 'not claimable now'}")
