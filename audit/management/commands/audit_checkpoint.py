from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from audit.checkpoints import CheckpointError, check_checkpoint, write_checkpoint


class Command(BaseCommand):
    help = ("Write the head of every audit chain (each run's and the access chain's) to a "
            "sealed checkpoint file, to keep where the database's writers cannot reach; or "
            "check a database against such a file: every head it names must still be in its "
            "chain. A chain set back to an earlier head with that head's seal, or emptied, "
            "passes verify_audit but not this check.")

    def add_arguments(self, parser):
        parser.add_argument("operation", choices=["write", "check"])
        parser.add_argument("file", help="the checkpoint file (.jsonl.gz); write refuses one "
                                         "that exists")

    def handle(self, *args, operation, file, **options):
        if not file.strip():
            raise CommandError("name the checkpoint file")
        try:
            if operation == "write":
                chains = write_checkpoint(Path(file))
                self.stdout.write(f"wrote the heads of {chains} chain(s) to {file}: keep it "
                                  "where the database's writers cannot reach")
                return
            report = check_checkpoint(Path(file))
        except CheckpointError as exc:
            raise CommandError(str(exc)) from None
        if report.problem_count:
            listed = "\n".join(f"  {problem}" for problem in report.problems)
            more = report.problem_count - len(report.problems)
            raise CommandError(
                f"{report.problem_count} of the {report.chains} chain(s) checkpointed at "
                f"{report.taken_at} no longer hold their head:\n{listed}"
                + (f"\n  ... and {more} more" if more else ""))
        self.stdout.write(
            f"every one of the {report.chains} chain(s) checkpointed at {report.taken_at} "
            f"still holds its head ({report.archived} of them closed by archive files)")
