from django.core.management.base import BaseCommand, CommandError

from audit.chain import verify_chain
from audit.models import AuditRecord


class Command(BaseCommand):
    help = "Verify every run's audit hash chain; exit non-zero naming the first broken record."

    def handle(self, *args, **options):
        runs = records = 0
        current_run, chain = None, []

        def check(run_id, chain):
            broken = verify_chain(chain)
            if broken is not None:
                raise CommandError(
                    f"audit chain of run {run_id} is broken at record id={broken.pk} "
                    f"seq={broken.seq} action={broken.action}"
                )

        for record in AuditRecord.objects.order_by("run_id", "seq").iterator(chunk_size=2000):
            records += 1
            if record.run_id != current_run:
                if chain:
                    check(current_run, chain)
                    runs += 1
                current_run, chain = record.run_id, []
            chain.append(record)
        if chain:
            check(current_run, chain)
            runs += 1
        self.stdout.write(f"verified {records} audit records in {runs} runs: all chains intact")
