"""List and search runs from the command line: the console's filters, search and keyset
paging (runs.reads.selectors.runs_page), as text or --json."""

from django.core.management.base import CommandError

from api.selectors import MOST_A_PAGE, summary_of
from audit.arguments import ValuesCutShortCommand
from audit.quoting import quoted
from console.cli import (
    print_json,
    run_filters_refused,
    storable_text,
    user_named,
    workflow_filter_matches,
)
from runs.machine.storable import whole_number_argument, whole_number_in_range
from runs.models import ErrorClass, RunStatus, StepStatus
from runs.permissions import VIEW, grant_for
from runs.reads.cursors import decode_keyset, encode_keyset
from runs.reads.selectors import RunFilters, runs_page

# The most runs a page holds, as GET /api/runs allows: a script moving from one to the
# other keeps its pages.
MOST_RUNS_A_PAGE = MOST_A_PAGE


class Command(ValuesCutShortCommand):
    help = "List runs, newest status change first, with the console's filters and search."

    def add_arguments(self, parser):
        # No argparse choices: an unknown status is refused in the words of every door.
        parser.add_argument("--status", default="", help="one of: "
                            + ", ".join(RunStatus.values))
        parser.add_argument("--workflow", default="")
        parser.add_argument("--step-status", default="", choices=["", *StepStatus.values])
        parser.add_argument("--error-class", default="", choices=["", *ErrorClass.values])
        parser.add_argument("--attention", action="store_true", help="needs attention")
        parser.add_argument("--stuck", action="store_true")
        parser.add_argument("-q", "--search", default="",
                            help="business key, idempotency key or remote reference")
        parser.add_argument("--after", default="", help="the cursor a page printed last")
        parser.add_argument("--limit", type=whole_number_argument, default=50,
                            help=f"runs a page holds (1 to {MOST_RUNS_A_PAGE})")
        parser.add_argument("--user", default="",
                            help="list only the runs this user may see (a username)")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        run_filters_refused(options)  # the console's and the API's rule, in their words
        storable_text(options)
        whole_number_in_range(options["limit"], option="--limit", low=1,
                              high=MOST_RUNS_A_PAGE, then="page on with --after")
        user = user_named(options["user"]) if options["user"] else None
        workflow_filter_matches(options["workflow"], user=user)
        after = None
        if options["after"]:
            after = decode_keyset(options["after"])
            if after is None:
                raise CommandError(f"--after {quoted(options['after'])} is not a cursor this "
                                   "command printed")
        workflow_ids = None
        if user is not None:
            grant = grant_for(user, VIEW)
            workflow_ids = None if grant.everywhere else grant.workflow_ids
        filters = RunFilters(status=options["status"], workflow=options["workflow"],
                             step_status=options["step_status"],
                             error_class=options["error_class"],
                             attention=options["attention"], stuck=options["stuck"],
                             q=options["search"])
        rows, cursor = runs_page(filters, workflow_ids=workflow_ids, after=after,
                                 limit=options["limit"])
        runs = [summary_of(run) for run in rows]
        if options["json"]:
            print_json(self.stdout, {"runs": runs, "next_cursor": encode_keyset(cursor)})
            return
        if not runs:
            # A blank answer reads as a command that did nothing: say which it was.
            self.stdout.write(f"user {quoted(options['user'])} may see no workflow's runs"
                              if workflow_ids is not None and not workflow_ids
                              else "no run matches")
        for run in runs:
            self.stdout.write(
                f"{run['id']:>10}  {run['status']:<20} {run['workflow']:<24} "
                f"{run['business_key']:<32} {run['current_step'] or '-':<20} "
                f"{run['updated_at']:%Y-%m-%d %H:%M:%S}")
        if cursor:
            self.stdout.write(f"next page: --after '{encode_keyset(cursor)}'")
