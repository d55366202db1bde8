"""Print a run's history (its audit trail) from the command line, a page at a time, as
text or --json."""

from django.core.management.base import CommandError

from api.selectors import HISTORY_PAGE, MOST_A_PAGE, history_entry, history_page
from audit.arguments import ValuesCutShortCommand
from audit.quoting import quoted
from console.cli import id_given, no_run, print_json
from runs.machine import transitions
from runs.machine.storable import (
    whole_number,
    whole_number_argument,
    whole_number_in_range,
    written_visibly,
)
from runs.models import Run


class Command(ValuesCutShortCommand):
    help = "Print a run's audit trail, oldest first within a page (the newest page first)."

    def add_arguments(self, parser):
        # Read as text: int() reads "٢" as 2 (console.cli.id_given).
        parser.add_argument("run")
        parser.add_argument("--before", help="the seq a page printed as 'older'")
        parser.add_argument("--limit", type=whole_number_argument, default=HISTORY_PAGE)
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        # As GET /api/runs/{id}/history allows: a script moving from one to the other keeps
        # its pages.
        whole_number_in_range(options["limit"], option="--limit", low=1, high=MOST_A_PAGE,
                              then="page on with --before")
        run_id = id_given(options["run"], name="run id", thing="run")
        before = None
        if options["before"] is not None:
            # As the console reads its "before" (whole_number): no page printed "٣" or "-5".
            before = whole_number(options["before"])
            if not before:
                raise CommandError("--before takes the seq a page printed as 'older' (1 or "
                                   f"more, in digits 0-9), not {quoted(options['before'])}")
        try:
            run = Run.objects.get(pk=run_id)
        except Run.DoesNotExist:
            raise CommandError(no_run(run_id)) from None
        page = history_page(run, before=before, size=options["limit"])
        entries = [history_entry(r) for r in page.records]
        if options["json"]:
            print_json(self.stdout, {"run_id": run.pk, "entries": entries,
                                     "older": page.older})
            return
        for e in entries:
            # One line an entry: a reason's line break, written as it is, would forge the
            # entry after it (a person's reason may hold line breaks).
            reason = f"  reason: {written_visibly(e['reason'])}" if e["reason"] else ""
            changed = (f" {e['before'].get('status')} -> {e['after'].get('status')}"
                       if e["before"].get("status") != e["after"].get("status") else "")
            # A step the workflow's rule approved: its record's actor is the worker, which
            # would read as though someone had decided it.
            unasked = transitions.record_approval_words(e["action"])
            self.stdout.write(f"{e['seq']:>5} {e['at']:%Y-%m-%d %H:%M:%S} {e['action']:<26} "
                              f"{e['actor']:<20} {e['step'] or '-':<20}{changed}"
                              f"{'  (' + unasked + ')' if unasked else ''}{reason}")
        if not entries:
            # Silence would read as a run with no history.
            self.stdout.write(f"no entries of run {run.pk}"
                              + (f" before seq {before}" if before else ""))
        if page.older:
            self.stdout.write(f"older entries: --before {page.older}")
