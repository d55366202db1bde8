"""Bulk by filter from the command line: preview, start, carry out, follow and cancel a
bulk job (approvals.bulk), with the list's filters, as text or --json."""

from django.core.management.base import BaseCommand, CommandError

from approvals.bulk import (
    BulkForbidden,
    BulkRefused,
    bulk_preview,
    bulk_progress,
    cancel_bulk_job,
    run_bulk_job,
    start_bulk_job,
)
from approvals.models import BulkJob
from console.cli import acting_user, print_json, storable_text, user_named
from runs.machine.storable import whole_number
from runs.models import ErrorClass, RunStatus, StepStatus
from runs.operator.actions import ACTIONS
from runs.reads.selectors import RunFilters


class Command(BaseCommand):
    help = ("preview ACTION / start ACTION: an action on every run the filters match; run JOB: "
            "carry a job out here (a worker does otherwise); show JOB; cancel JOB.")

    def add_arguments(self, parser):
        parser.add_argument("verb", choices=["preview", "start", "run", "show", "cancel"])
        parser.add_argument("target", help="the action (preview, start) or the job id")
        parser.add_argument("--user", default="")
        parser.add_argument("--reason", default="")
        parser.add_argument("--status", default="", choices=["", *RunStatus.values])
        parser.add_argument("--workflow", default="")
        parser.add_argument("--step-status", default="", choices=["", *StepStatus.values])
        parser.add_argument("--error-class", default="", choices=["", *ErrorClass.values])
        parser.add_argument("--attention", action="store_true")
        parser.add_argument("--stuck", action="store_true")
        parser.add_argument("-q", "--search", default="")
        parser.add_argument("--json", action="store_true")

    def handle(self, *args, **options):
        storable_text(options)
        verb, target = options["verb"], options["target"]
        if verb in ("preview", "start", "cancel") and not options["user"]:
            raise CommandError("--user is required for preview/start/cancel")
        if verb in ("preview", "start"):
            if target not in ACTIONS:
                raise CommandError(f"no action {target!r}; the actions are: "
                                   f"{', '.join(ACTIONS)}")
            # A preview only reads; a job acts in its starter's name.
            user = (user_named if verb == "preview" else acting_user)(options["user"])
            filters = RunFilters(status=options["status"], workflow=options["workflow"],
                                 step_status=options["step_status"],
                                 error_class=options["error_class"],
                                 attention=options["attention"], stuck=options["stuck"],
                                 q=options["search"])
            if verb == "preview":
                preview = bulk_preview(target, filters, user=user)
                return self._out(options, {"matching": preview.matching,
                                           "may_act": preview.may_act,
                                           "acceptable": preview.acceptable})
            try:
                job = start_bulk_job(target, filters, user=user, reason=options["reason"])
            except (BulkRefused, BulkForbidden) as exc:
                raise CommandError(str(exc)) from None
            return self._out(options, {"job": job.pk, "total": job.total})
        job_id = whole_number(target)
        if job_id is None or not BulkJob.objects.filter(pk=job_id).exists():
            raise CommandError(f"no bulk job {target!r}")
        if verb == "run":
            run_bulk_job(job_id)
        elif verb == "cancel":
            try:
                cancelled = cancel_bulk_job(job_id, user=acting_user(options["user"]))
            except BulkForbidden as exc:
                raise CommandError(str(exc)) from None
            if not cancelled:
                raise CommandError(f"bulk job {job_id} had already finished")
        progress = bulk_progress(job_id)
        job = progress.job
        self._out(options, {"job": job.pk, "action": job.action, "status": job.status,
                            "total": job.total, "handled": progress.handled,
                            "outcomes": progress.counts, "approval_request": job.approval_id})

    def _out(self, options, value: dict) -> None:
        if options["json"]:
            print_json(self.stdout, value)
        else:
            self.stdout.write("  ".join(f"{k}: {v}" for k, v in value.items()))
