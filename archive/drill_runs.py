"""Removing the runs the drill kit started (Run.drill, runs.operator.drills), for
`manage.py remove_drill_runs`.

The audit trail stays append-only: drill runs leave the hot tables the way every run does,
through archive files (archive.archiving, ARCHIVE_RUNS_PER_FILE runs at most each, under the
archiving pass's lock) that keep their chains verifiable. A drill run that is not final is
terminated first (as the system, with its own second person: no person is asked about a
drill); one the transitions will not terminate is kept and named. It lives here, not with
the drill kit, because runs may not import the archive app.
"""

from django.conf import settings

from audit.chain import Actor
from runs import store
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.machine.single_pass import single_pass
from runs.models import FINAL_RUN_STATUSES, Run

from . import writing
from .archiving import JOB, ArchiveReport, archive_file, finish_unfinished, refuse_sizes
from .reading import storage

CLEANER = Actor.system("remove_drill_runs")
CLEANER_SECOND = Actor.system("remove_drill_runs (second person)")


def remove_drill_runs(*, actor: str, report: ArchiveReport) -> list[str]:
    """Terminate every open drill run, archive the final ones to files of at most
    ARCHIVE_RUNS_PER_FILE runs and remove them, as an archiving pass does, at most
    ARCHIVE_MAX_RUNS_PER_PASS of them (those past it are counted in report.runs_left, for
    the next removal); the files and the runs removed are counted in `report`. Returns the
    runs kept, each with why.

    It holds the archiving pass's lock (archive.archiving.JOB) throughout: beside a pass or
    another removal, the same drill runs would be written to two files, or removed while
    the other writes them. When another holds it nothing is done, and report.locked_out
    says so. An archive storage that refuses a file raises OSError: the runs of the files
    recorded before it are removed, the others stay."""
    refuse_sizes(runs_per_file=settings.ARCHIVE_RUNS_PER_FILE,
                 max_runs=settings.ARCHIVE_MAX_RUNS_PER_PASS,
                 remove_batch=settings.ARCHIVE_REMOVE_BATCH)
    with single_pass(JOB) as mine:
        if not mine:
            report.locked_out = True
            return []
        # A removal killed after recording its file goes on through that file, as a pass
        # does: written again, its runs would be closed by two files.
        finish_unfinished(actor=actor, remove_batch=settings.ARCHIVE_REMOVE_BATCH,
                          report=report)
        report.partial_files_removed = writing.remove_stale_partials(storage())
        kept = terminate_open_drill_runs()
        final = Run.objects.filter(drill=True, status__in=list(FINAL_RUN_STATUSES))
        # As many as an archiving pass takes: a drill of a million runs is removed over
        # several commands, each bounded in time and in the files it writes.
        most = settings.ARCHIVE_MAX_RUNS_PER_PASS
        ids = list(final.order_by("pk").values_list("pk", flat=True)[:most])
        report.runs_left = final.count() - len(ids)
        # Dated by the database's clock, as an archiving pass dates its files and removals.
        now = store.current().now()
        per_file = settings.ARCHIVE_RUNS_PER_FILE
        for start in range(0, len(ids), per_file):
            archive = archive_file(ids[start:start + per_file], actor=actor, now=now,
                                   remove_batch=settings.ARCHIVE_REMOVE_BATCH, report=report)
            if archive is not None:
                archive.refresh_from_db()
                kept += [f"run {pk}: changed, or was held by another session, while it was archived"
                         for pk in archive.kept_run_ids or []]
        return kept


def terminate_open_drill_runs() -> list[str]:
    """Terminate every drill run still open; returns those left open, each with why."""
    refused = {}
    for run in Run.objects.filter(drill=True).exclude(status__in=list(FINAL_RUN_STATUSES)):
        try:
            transitions.terminate(run.pk, actor=CLEANER, reason="drill run removed",
                                  approved_by=CLEANER_SECOND)
        except TransitionNotAllowed as exc:
            refused[run.pk] = str(exc)
    # Read again after the terminations: one that ended with an effect not settled stays
    # open (attention), and would otherwise be left behind unnamed.
    return [f"run {pk} ({key}, {status}): {refused.get(pk) or message or 'still open'}"
            for pk, key, status, message in Run.objects.filter(drill=True)
            .exclude(status__in=list(FINAL_RUN_STATUSES)).order_by("pk")
            .values_list("pk", "business_key", "status", "status_message")]
