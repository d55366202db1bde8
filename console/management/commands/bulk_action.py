"""Bulk by filter from the command line: preview, start, carry out, follow and cancel a
bulk job (approvals.bulk), with the list's filters, as text or --json."""

from django.core.management.base import CommandError

from approvals.bulk import (
    BulkForbidden,
    BulkRefused,
    bulk_preview,
    bulk_progress,
    cancel_bulk_job,
    may_follow,
    may_watch,
    run_bulk_job,
    start_bulk_job,
)
from approvals.models import BulkJob, BulkJobPhase, BulkJobStatus
from approvals.operator_actions import ActionInputError, InputNotRead, refuse_input_not_read
from audit.arguments import ValuesCutShortCommand
from audit.quoting import quoted
from console.cli import (
    acting_user,
    id_given,
    print_json,
    proven,
    run_filters_refused,
    storable_text,
    user_named,
    workflow_filter_matches,
)
from runs.models import ErrorClass, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.reads.selectors import RunFilters


class Command(ValuesCutShortCommand):
    help = ("preview ACTION / start ACTION: an action on every run the filters match; run JOB: "
            "carry a job out here (a worker does otherwise); show JOB; cancel JOB. cancel is "
            "for the person who started the job, or a superuser; show also for the second "
            "person of its request.")

    def add_arguments(self, parser):
        parser.add_argument("verb", choices=["preview", "start", "run", "show", "cancel"])
        parser.add_argument("target", help="the action (preview, start) or the job id")
        parser.add_argument("--user", default="")
        parser.add_argument("--reason", default="",
                            help="start: recorded with the action on each run")
        parser.add_argument("--step", default="",
                            help="start, for a step action: the step on every run (else the "
                                 "first step each run allows)")
        # No argparse choices: an unknown status is refused in the words of every door.
        parser.add_argument("--status", default="", help="one of: "
                            + ", ".join(RunStatus.values))
        parser.add_argument("--workflow", default="")
        parser.add_argument("--step-status", default="", choices=["", *StepStatus.values])
        parser.add_argument("--error-class", default="", choices=["", *ErrorClass.values])
        parser.add_argument("--attention", action="store_true")
        parser.add_argument("--stuck", action="store_true")
        parser.add_argument("-q", "--search", default="")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        run_filters_refused(options)  # as list_runs, the console and the API refuse them
        storable_text(options)
        verb, target = options["verb"], options["target"]
        step = options["step"].strip()
        if verb in ("preview", "start", "show", "cancel") and not options["user"]:
            raise CommandError("--user is required for preview/start/show/cancel")
        if step and verb != "start":
            # Dropped unseen, it would leave the person believing it counted.
            raise CommandError(f"--step does not apply to {verb}; leave it out. Nothing was "
                               "done.")
        if verb in ("preview", "start"):
            if target not in ACTIONS:
                raise CommandError(f"no action {quoted(target, limit=40)}; the actions are: "
                                   f"{', '.join(ACTIONS)}")
            if verb == "preview":
                refuse_what_a_verb_ignores(options, verb)
            else:
                try:
                    # The API's check (api.bulk_routes), asked before the password so that
                    # a wrong command costs none: each run's action would refuse it.
                    refuse_input_not_read(target, ActionInput(reason=options["reason"],
                                                              step=step))
                except InputNotRead as exc:
                    flags = ", ".join(f"--{name}" for name in exc.fields)
                    raise CommandError(f"{flags} does not apply with {target}; leave it out. "
                                       "Nothing was done.") from None
                except ActionInputError as exc:
                    raise CommandError(str(exc)) from None
            # Only the workflows the person may see are asked and named, before the
            # password: a misspelt name costs none.
            user = user_named(options["user"])
            workflow_filter_matches(options["workflow"], user=user)
            if verb == "start":
                user = proven(user)  # a job acts in its starter's name; a preview only reads
            filters = RunFilters(status=options["status"], workflow=options["workflow"],
                                 step_status=options["step_status"],
                                 error_class=options["error_class"],
                                 attention=options["attention"], stuck=options["stuck"],
                                 q=options["search"])
            if verb == "preview":
                preview = bulk_preview(target, filters, user=user)
                return self._out(options, {"matching": preview.matching,
                                           "may_act": preview.may_act,
                                           "acceptable": preview.acceptable,
                                           "held_to_settle": preview.held_to_settle})
            try:
                # As the API passes it (api.bulk_routes.start_bulk).
                job, _ = start_bulk_job(target, filters, user=user, reason=options["reason"],
                                        params={"step": step} if step else None)
            except (BulkRefused, BulkForbidden) as exc:
                raise CommandError(str(exc)) from None
            return self._out(options, {"job": job.pk, "total": job.total})
        job_id = id_given(target, name="job id", thing="bulk job")
        refuse_what_a_verb_ignores(options, verb)
        job = BulkJob.objects.filter(pk=job_id).first()
        if job is None:
            raise CommandError(f"no bulk job {job_id}")
        if verb == "run":
            # Worked through to its end (done, or cancelled on the way), unless another
            # process holds its lease: then it returns the job untouched, still running, and
            # the command would print its status as if it had carried it out.
            held = run_bulk_job(job_id)
            if held.status == BulkJobStatus.RUNNING:
                until = (f" until {held.lease_until:%Y-%m-%d %H:%M:%S %Z}"
                         if held.lease_until else "")
                raise CommandError(
                    f"bulk job {job_id} is held by a worker{until} (BULK_JOB_LEASE_SECONDS): "
                    "it carries the job out, or stopped and leaves it free after that time. "
                    f"Nothing was done here; follow it with bulk_action show {job_id}")
        elif verb == "show":
            _follower(job, options["user"], verb, rule=may_watch)
        elif verb == "cancel":
            try:
                cancelled = cancel_bulk_job(job_id, user=_follower(job, options["user"], verb,
                                                                   rule=may_follow))
            except BulkForbidden as exc:
                raise CommandError(str(exc)) from None
            if not cancelled:
                raise CommandError(f"bulk job {job_id} had already finished")
        progress = bulk_progress(job_id)
        job = progress.job
        # The phase as the console's page and the API give it: "applying" once its request
        # was approved, when the job runs again on the runs that waited for it.
        phase = job.phase if options["json"] else BulkJobPhase(job.phase).label
        self._out(options, {"job": job.pk, "action": job.action, "status": job.status,
                            "phase": phase, "total": job.total, "handled": progress.handled,
                            "skipped": progress.skipped,
                            "outcomes": progress.counts, "approval_request": job.approval_id})

    def _out(self, options, value: dict) -> None:
        if options["json"]:
            print_json(self.stdout, value)
        else:
            self.stdout.write("  ".join(f"{k}: {v}" for k, v in value.items()))


# The options that pick a job's runs, with their flags: a job keeps those it was started
# with.
FILTER_OPTIONS = {"status": "--status", "workflow": "--workflow", "step_status": "--step-status",
                  "error_class": "--error-class", "attention": "--attention",
                  "stuck": "--stuck", "search": "--search"}


def refuse_what_a_verb_ignores(options, verb: str) -> None:
    """A CommandError naming the options given to preview, run, show or cancel that it would
    not read (--step, which start alone reads, is refused before). Dropped unseen, a reason
    would seem to be recorded (a preview records nothing; a job keeps the reason it was
    started with), a filter to narrow the job, a person to be whom run acts as (it acts as
    the job's starter)."""
    given = ["--reason"] if options["reason"] else []
    if verb != "preview":  # a preview reads the filters: they pick the runs it counts
        given += [flag for name, flag in FILTER_OPTIONS.items()
                  if options[name] not in ("", False)]
    if verb == "run" and options["user"]:
        given.append("--user")
    if not given:
        return
    why = ("a preview only counts the runs the filters match, and records nothing"
           if verb == "preview" else
           "the job keeps the filters and reason it was started with"
           + (" and acts as the person who started it" if verb == "run" else ""))
    raise CommandError(
        f"{', '.join(given)} {'does' if len(given) == 1 else 'do'} not apply to {verb}: "
        f"{why}; leave {'it' if len(given) == 1 else 'them'} out. Nothing was done.")


def _follower(job: BulkJob, username: str, verb: str, *, rule):
    """The person `username` names, once they have proved who they are, if `rule` lets them
    `verb` `job`: the rule of the console's page and the API (approvals.bulk: may_watch to
    see it, also the second person of its request; may_follow to cancel it, the person who
    started it or a superuser), so that naming its starter is not seeing their job."""
    user = acting_user(username)
    if not rule(user, job):
        who = (", a superuser or the second person of its request" if rule is may_watch
               else " or a superuser")
        raise CommandError(f"bulk job {job.pk} is another person's: only "
                           f"{job.requested_by.get_username()}{who} may {verb} it")
    return user
