"""What a bulk job gives each of its runs, in both of its phases (approvals.bulk acting on
the runs, approvals.bulk_approved applying the second person's approval): the reason with
the job's mark, the step a step action aims at, and how a run's outcome row is completed."""

from dataclasses import replace
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from audit.models import AuditRecord
from runs.machine.storable import person_text_problem
from runs.models import Run
from runs.operator.actions import ACTIONS, ActionInput

from .bulk_lease import LeaseLost, hold_for_outcome
from .models import BulkJob, BulkOutcome


def marked(reason: str, job_id: int) -> str:
    """The reason the job's audit records carry: the person's, with the job's mark."""
    return f"{reason.strip()} [bulk job {job_id}]"


def mark_problem(reason: str, job_id: int | None = None) -> str | None:
    """Why `reason` (as kept: stripped, redacted) cannot be carried with the mark of job
    `job_id` by each run's record (storable.person_text_problem), or None. Without an id
    (no job made yet), with the least id the next job can have: ids only grow, and a longer
    id leaves less room, so a reason refused now is refused whatever the job's number. So
    every caller (a token acting for nobody, which makes no job, too) is told it with the
    other faults of the reason, before anything else of the request."""
    least = job_id or (BulkJob.objects.order_by("-pk").values_list("pk", flat=True)
                       .first() or 0) + 1
    if (problem := person_text_problem(marked(reason, least))) is None:
        return None
    # The number a job not made yet will have is not known: its mark is named as such.
    mark = marked("", job_id).strip() if job_id else "[bulk job N]"
    return f"reason: {problem} with the job's mark ({mark}) that each run's record carries"


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


def settle_claims(job: BulkJob) -> None:
    """Settle the claims job `job`'s workers left (a run claimed, the outcome of its action
    not written: the worker died, or lost the job between the two), for a job no worker
    takes again (cancelled): done where the run's audit trail holds the job's record (its
    transition writes it in the commit of its change), else removed (nothing was done to
    the run). Once the job's cancel is committed, no action of it commits any more
    (approvals.bulk_lease.hold, under the job's row lock, which the cancel waited for)."""
    claims = BulkOutcome.objects.filter(job=job, outcome=BulkOutcome.Outcome.CLAIMED)
    for run_id in claims.values_list("run_id", flat=True):
        if AuditRecord.objects.filter(run_id=run_id, reason=marked(job.reason, job.pk)) \
                .exists():
            finish_row(job, run_id, BulkOutcome.Outcome.DONE,
                       "done (found in the audit trail once the job was cancelled)",
                       was=BulkOutcome.Outcome.CLAIMED)
        else:
            claims.filter(run_id=run_id).delete()


def settle_claim(job: BulkJob, run_id: int, held: datetime, outcome: str | None,
                 message: str) -> bool:
    """Complete run `run_id`'s claim, under the lease marked `held`. False, writing
    nothing, if another worker took the job since: what a worker that stalled past its
    lease met (a refusal, a run held too long) may be that successor's own doing (it acted
    on the run first), and the claim is the successor's to settle. `outcome` None: the
    claim is let go (nothing done, no outcome)."""
    try:
        with transaction.atomic():
            hold_for_outcome(job.pk, held)
            if outcome is None:
                BulkOutcome.objects.filter(job=job, run_id=run_id,
                                           outcome=BulkOutcome.Outcome.CLAIMED).delete()
            else:
                finish_row(job, run_id, outcome, message, was=BulkOutcome.Outcome.CLAIMED)
    except LeaseLost:
        return False
    return True
