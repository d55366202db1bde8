"""Remove the runs the drill kit started (Run.drill), in one command: terminated if still
open, archived to files, then removed (archive.drill_runs does it; this command reports)."""

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import CommandError

from archive.archiving import ArchiveReport, default_actor
from archive.drill_runs import remove_drill_runs
from audit.arguments import ValuesCutShortCommand
from audit.quoting import file_name


class Command(ValuesCutShortCommand):
    help = ("Remove the drill runs (started by manage.py drill): terminated if still open, "
            "archived to files of at most ARCHIVE_RUNS_PER_FILE runs (the audit chains stay "
            "verifiable), then removed, at most ARCHIVE_MAX_RUNS_PER_PASS at a time (it says "
            "how many are left). Refused, nothing done, while an archiving pass or another "
            "removal runs.")

    def handle(self, *args, **options):
        report = ArchiveReport()
        try:
            kept = remove_drill_runs(actor=f"remove_drill_runs {default_actor()}",
                                     report=report)
        except ImproperlyConfigured as exc:
            raise CommandError(str(exc)) from None
        except OSError as exc:
            done = (f"The {report.runs_removed} drill run(s) archived in the files recorded "
                    f"before it ({', '.join(map(file_name, report.files))}) are removed, no "
                    "other"
                    if report.files else "No drill run was removed")
            raise CommandError(
                f"the archive storage refused the drill runs' file: {exc}. {done}; those "
                "that were open are terminated. Run remove_drill_runs again once the storage "
                "takes files") from None
        if report.locked_out:
            # Both write archive files of runs and remove them: side by side, the same runs
            # would go to two files, or be removed while the other writes them.
            raise CommandError("another archive pass or drill run removal is under way (it "
                               "holds the archive lock); nothing was done. Run "
                               "remove_drill_runs again once it has finished")
        self.stdout.write(f"{report.runs_removed} drill run(s) removed"
                          + (f", archived in {', '.join(map(file_name, report.files))}"
                             if report.files else ""))
        for line in kept:
            self.stdout.write(f"kept: {line}")
        # A drill run left in the tables is a removal that did not happen: a script
        # reading the exit status alone would take it for done.
        unfinished = []
        if kept:
            unfinished.append(f"{len(kept)} drill run(s) kept (named above); settle them, "
                              "then run remove_drill_runs again")
        if report.runs_left:
            unfinished.append(f"{report.runs_left} drill run(s) left, past the "
                              f"{settings.ARCHIVE_MAX_RUNS_PER_PASS} removed at a time "
                              "(ARCHIVE_MAX_RUNS_PER_PASS): run remove_drill_runs again")
        if unfinished:
            raise CommandError(". ".join(unfinished))
