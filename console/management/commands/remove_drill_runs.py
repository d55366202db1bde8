"""Remove the runs the drill kit started (Run.drill), in one command: terminated if still
open, archived to a file, then removed (archive.drill_runs does it; this command reports)."""

from django.core.management.base import BaseCommand, CommandError

from archive.archiving import default_actor
from archive.drill_runs import remove_drill_runs


class Command(BaseCommand):
    help = ("Remove every drill run (started by manage.py drill): terminated if still open, "
            "archived to a file (the audit chains stay verifiable), then removed.")

    def handle(self, *args, **options):
        try:
            removed, kept, name = remove_drill_runs(
                actor=f"remove_drill_runs {default_actor()}")
        except OSError as exc:
            raise CommandError(
                f"the archive storage refused the drill runs' file: {exc}. No drill run was "
                "removed; those that were open are terminated. Run remove_drill_runs again "
                "once the storage takes files") from None
        self.stdout.write(f"{removed} drill run(s) removed"
                          + (f", archived in {name}" if name else ""))
        for line in kept:
            self.stdout.write(f"kept: {line}")
        if kept:
            # A drill run left in the tables is a removal that did not happen: a script
            # reading the exit status alone would take it for done.
            raise CommandError(f"{len(kept)} drill run(s) kept (named above); settle them, "
                               "then run remove_drill_runs again")
