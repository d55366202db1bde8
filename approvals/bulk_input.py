"""What a bulk job gives each of its runs, in both of its phases (approvals.bulk acting on
the runs, approvals.bulk_approved applying the second person's approval): the reason with
the job's mark, the step a step action aims at, and how a run's outcome row is completed."""

from dataclasses import replace

from django.utils import timezone

from runs.models import Run
from runs.operator.actions import ACTIONS, ActionInput

from .models import BulkJob, BulkOutcome


def marked(reason: str, job_id: int) -> str:
    """The reason the job's audit records carry: the person's, with the job's mark."""
    return f"{reason.strip()} [bulk job {job_id}]"


def job_input(job: BulkJob, run_id: int) -> ActionInput:
    """The input of the job's action on one run: the job's reason (marked) and step."""
    spec = ACTIONS[job.action]
    given = ActionInput(reason=marked(job.reason, job.pk), mode="ask",
                        **{k: v for k, v in (job.params or {}).items() if k == "step"})
    if spec.takes_step and not given.step:
        given = replace(given, step=first_step(spec, Run.objects.get(pk=run_id)))
    return given


def first_step(spec, run: Run) -> str:
    """The step a step action taken in bulk (by a job or on runs a person ticked) aims at on
    `run`: the first one it applies to, or "" where it applies to none."""
    targets = spec.eligible_steps(run, list(run.steps.order_by("position")))
    return targets[0].name if targets else ""


def finish_row(job: BulkJob, run_id: int, outcome: str, message: str, *,
               was: str | None = None) -> int:
    """Complete run `run_id`'s outcome row; `was`: only if its outcome is still that one.
    How many rows changed (0 or 1)."""
    rows = BulkOutcome.objects.filter(job=job, run_id=run_id)
    if was is not None:
        rows = rows.filter(outcome=was)
    return rows.update(outcome=outcome, message=message[:2000], at=timezone.now())
