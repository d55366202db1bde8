"""Removing the runs the drill kit started (Run.drill, runs.operator.drills), for
`manage.py remove_drill_runs`.

The audit trail stays append-only: drill runs leave the hot tables the way every run does,
through an archive file (archive.archiving) that keeps their chains verifiable. A drill run
that is not final is terminated first (as the system, with its own second person: no person
is asked about a drill); one the transitions will not terminate is kept and named. It lives
here, not with the drill kit, because runs may not import the archive app.
"""

from django.conf import settings

from audit.chain import Actor
from runs import store
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import FINAL_RUN_STATUSES, Run

from .archiving import ArchiveReport, remove, write_file

CLEANER = Actor.system("remove_drill_runs")
CLEANER_SECOND = Actor.system("remove_drill_runs (second person)")


def remove_drill_runs(*, actor: str) -> tuple[int, list[str], str]:
    """Terminate every open drill run, archive the final ones to one file and remove them.
    Returns (runs removed, runs kept with why, the archive file's name or ""). An archive
    storage that refuses the file raises OSError, with nothing removed."""
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
    # Dated by the database's clock, as an archiving pass dates its files and removals.
    archive = write_file(ids, actor=actor, now=store.current().now())
    if archive is None:
        return 0, kept, ""
    report = ArchiveReport()
    remove(archive, actor=actor, remove_batch=settings.ARCHIVE_REMOVE_BATCH, report=report)
    archive.refresh_from_db()
    kept += [f"run {pk}: changed while it was archived" for pk in archive.kept_run_ids or []]
    return report.runs_removed, kept, archive.name
