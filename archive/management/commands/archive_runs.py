from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from archive import archiving
from audit.arguments import ValuesCutShortCommand
from audit.quoting import file_name
from runs.machine.storable import (
    has_control_characters,
    text_problem,
    whole_number_argument,
    whole_number_in_range,
)

# The most runs a count may say: what a PostgreSQL bigint holds, as a pass's queries take
# --batch and --max-runs as their LIMIT.
MOST_RUNS = 2**63 - 1
# No run is older than a hundred years, so a longer retention archives nothing either; and
# one of some two thousand years puts the cut before the first day a datetime holds.
LONGEST_RETENTION_DAYS = 36_500
# The recorded name, "archive_runs command (<actor>)", fits ArchiveFile.created_by and the
# audit records' actor label (200 characters each).
LONGEST_ACTOR = 200 - len("archive_runs command ()")


class Command(ValuesCutShortCommand):
    help = ("Move finished runs older than their retention (RUNS_RETENTION_DAYS, or the "
            "workflow's retention_days) out of the hot tables into gzip JSON Lines archive "
            "files, then remove them in short batches. What beat does every "
            "ARCHIVE_INTERVAL_SECONDS.")

    def add_arguments(self, parser):
        parser.add_argument("--older-than-days", type=whole_number_argument, default=None,
                            help="retention for this pass, for every workflow (default: the "
                                 "setting and each workflow's retention_days)")
        parser.add_argument("--dry-run", action="store_true",
                            help="count the runs a pass would archive; write nothing")
        parser.add_argument("--batch", type=whole_number_argument, default=None,
                            help=f"runs per archive file (default "
                                 f"{settings.ARCHIVE_RUNS_PER_FILE})")
        parser.add_argument("--max-runs", type=whole_number_argument, default=None,
                            help=f"runs per pass (default {settings.ARCHIVE_MAX_RUNS_PER_PASS})")
        parser.add_argument("--remove-batch", type=whole_number_argument, default=None,
                            help=f"runs removed per transaction (default "
                                 f"{settings.ARCHIVE_REMOVE_BATCH})")
        parser.add_argument("--actor", default="",
                            help="who runs the pass, as recorded (default: user@host)")

    def handle(self, *args, older_than_days, dry_run, batch, max_runs, remove_batch, actor,
               **options):
        for name, value in (("--batch", batch), ("--max-runs", max_runs),
                            ("--remove-batch", remove_batch)):
            if value is not None:
                whole_number_in_range(value, option=name, low=1, high=MOST_RUNS,
                                      then="nothing was done")
        if older_than_days is not None:
            whole_number_in_range(older_than_days, option="--older-than-days", low=0,
                                  high=LONGEST_RETENTION_DAYS,
                                  then="no run is a hundred years old; nothing was done")
        if (problem := text_problem(actor)) is not None:
            # Checked before any run is read: the name goes into each archived run's record.
            raise CommandError(f"--actor: {problem}; give it as UTF-8 text. Nothing was done.")
        if has_control_characters(actor):
            # The name is one line of each archived run's record and of the archive's row.
            raise CommandError("--actor must not contain control characters (line breaks, "
                               "tabs, bidirectional controls, ...). Nothing was done.")
        if len(actor) > LONGEST_ACTOR:
            raise CommandError(f"--actor is {len(actor)} characters; at most {LONGEST_ACTOR}. "
                               "Nothing was done.")
        actor = f"archive_runs command ({actor or archiving.default_actor()})"
        try:
            report = archiving.archive_runs(
                actor=actor, runs_per_file=batch, max_runs=max_runs,
                remove_batch=remove_batch, dry_run=dry_run, older_than_days=older_than_days)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            raise CommandError(
                f"the archive storage refused a file: {exc}. Files written before it are "
                "complete and recorded; the runs of this one stay in the hot tables") from None
        if report.locked_out:
            raise CommandError("another archiving pass or drill run removal is running (it "
                               "holds the archive lock); nothing done")
        if dry_run:
            self.stdout.write(f"dry run: {report.eligible} runs would be archived")
            return
        for name in report.files:
            self.stdout.write(f"wrote {file_name(name)}")
        self.stdout.write(
            f"archived {report.runs_removed} runs in {len(report.files)} files "
            f"({report.bytes_written} bytes); {report.runs_kept} changed since they were "
            "read and stay in the hot tables")
        if report.runs_busy:
            self.stdout.write(
                f"{report.runs_busy} runs were held by another session (a transaction left "
                "open) when their turn came; they stay in the hot tables until a later pass")
        if report.runs_held:
            self.stdout.write(
                f"{report.runs_held} runs wait for work still to be done for them (webhook "
                "deliveries not yet sent) and stay in the hot tables until a later pass")
