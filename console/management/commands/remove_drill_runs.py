"""Remove the runs the drill kit started (Run.drill), in one command.

The audit trail stays append-only: drill runs leave the hot tables the way every run does,
through an archive file (archive.archiving) that keeps their chains verifiable. A drill run
that is not final is terminated first (as the system, with its own second person: no person
is asked about a drill); one the transitions will not terminate is kept and named.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from archive.archiving import ArchiveReport, default_actor, remove, write_file
from audit.chain import Actor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import FINAL_RUN_STATUSES, Run

CLEANER = Actor.system("remove_drill_runs")
CLEANER_SECOND = Actor.system("remove_drill_runs (second person)")


def remove_drill_runs(*, actor: str) -> tuple[int, list[str], str]:
    """(runs removed, runs kept with why, the archive file's name or "")."""
    refused = {}
    for run in Run.objects.filter(drill=True).exclude(status__in=list(FINAL_RUN_STATUSES)):
        try:
            transitions.terminate(run.pk, actor=CLEANER, reason="drill run removed",
                                  approved_by=CLEANER_SECOND)
        except TransitionNotAllowed as exc:
            refused[run.pk] = str(exc)
    # Read again after the terminations: one that ended with an effect not settled stays
    # open (attention), and would otherwise be left behind unnamed.
    kept = [f"run {pk} ({key}, {status}): {refused.get(pk) or message or 'still open'}"
            for pk, key, status, message in Run.objects.filter(drill=True)
            .exclude(status__in=list(FINAL_RUN_STATUSES)).order_by("pk")
            .values_list("pk", "business_key", "status", "status_message")]
    ids = list(Run.objects.filter(drill=True, status__in=list(FINAL_RUN_STATUSES))
               .values_list("pk", flat=True))
    if not ids:
        return 0, kept, ""
    archive = write_file(ids, actor=actor, now=timezone.now())
    if archive is None:
        return 0, kept, ""
    report = ArchiveReport()
    remove(archive, actor=actor, remove_batch=settings.ARCHIVE_REMOVE_BATCH, report=report)
    archive.refresh_from_db()
    kept += [f"run {pk}: changed while it was archived" for pk in archive.kept_run_ids or []]
    return report.runs_removed, kept, archive.name


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
