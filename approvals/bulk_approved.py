"""A bulk job's approved phase: the second person approved the job's one four-eyes request,
and the job's worker takes the action on each run that waited for them.

The decision is recorded and the job's approval applied in one transaction (approvals.
decisions): applying it turns the job back to running, in its `applying` phase, and hands
it to a worker once committed (approve_job). The action on each run is the worker's, on
the job's one path (approvals.bulk.run_bulk_job: its lease, batches, take-over after a
worker died, cancel): taken in the approver's request, a job of a thousand runs outlasted
a web server's timeout, and could never be decided from the console or the API.

Never twice on a run: a run's action, the withdrawal of the waits it ended and its outcome
row (which leaves `second_person`) commit together, under the job's lease (apply_one). A
worker killed before that commit leaves nothing of the run, and its successor finds the
row still waiting; after it, the row tells that it was done.
"""

import logging
from datetime import datetime
from functools import partial

from django.contrib.auth import get_user_model
from django.db import OperationalError, transaction
from django.utils import timezone

from runs.execution.database_outage import would_not_wait
from runs.machine import crashpoints, transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import Run
from runs.operator.actions import ACTIONS, ActionInputError
from runs.permissions import grant_for

from .bulk_input import finish_row, job_input
from .bulk_lease import LeaseLost, hand_over, hold
from .four_eyes import decider, request_bulk_operator_action, requester_actor, requester_refusal
from .models import ApprovalRequest, BulkJob, BulkJobPhase, BulkJobStatus, BulkOutcome
from .requests import lock_run
from .withdrawal import withdraw_unawaited_of

logger = logging.getLogger(__name__)

Outcome = BulkOutcome.Outcome


def approve_job(job_id: int, approval: ApprovalRequest) -> None:
    """In the transaction that records `approval`'s approval: the job it names goes back to
    running, applying it, and is handed to a worker once that commits. Once only: applied
    again (the sweep retrying a decision), it changes nothing. TransitionNotAllowed, nothing
    written, for a job cancelled meanwhile (or that names another request): its approver is
    told that nothing follows."""
    # A job done acting, or still finishing (its request was made, the job not yet marked
    # done: bulk._finish leaves a job in another phase as it is). The worker holding it
    # loses its lease here, and the next takes it up in the new phase.
    moved = BulkJob.objects.filter(
        pk=job_id, approval_id=approval.pk, phase=BulkJobPhase.ACTING,
        status__in=[BulkJobStatus.RUNNING, BulkJobStatus.DONE],
    ).update(status=BulkJobStatus.RUNNING, phase=BulkJobPhase.APPLYING, cursor=0,
             lease_until=None, finished_at=None)
    if not moved:
        job = BulkJob.objects.filter(pk=job_id).first()
        if job is not None and job.phase == BulkJobPhase.APPLYING \
                and job.approval_id == approval.pk:
            return
        if job is not None and job.status == BulkJobStatus.CANCELLED:
            raise TransitionNotAllowed(f"bulk job {job_id} was cancelled: nothing more is "
                                       "done for it")
        raise TransitionNotAllowed(f"bulk job {job_id} does not wait for approval request "
                                   f"{approval.pk}")
    transaction.on_commit(partial(hand_over, job_id))
    logger.info("bulk job %s: approval request %s approved; applying it", job_id,
                approval.pk)


def reopen_left_unapplied() -> list[int]:
    """Jobs marked done in their applying phase while runs still wait for the approval,
    turned back to running: the ids, for the sweep to hand to a worker. Only a worker of the
    release before (a rolling release: the approval decided on this release's web server,
    the job handed to a worker not yet restarted) does that, as it knows no phase: it walks
    the job's filter again, finds every run settled or waiting, makes no request (the job
    has one) and marks the job done, the approval never applied. This release's worker
    marks an applying job done only once no run waits."""
    left = BulkJob.objects.filter(
        status=BulkJobStatus.DONE, phase=BulkJobPhase.APPLYING,
        pk__in=BulkOutcome.objects.filter(outcome=Outcome.SECOND_PERSON).values("job_id"))
    ids = list(left.values_list("pk", flat=True)[:50])
    reopened = []
    for job_id in ids:
        # Conditional, as approve_job is: a job cancelled meanwhile stays cancelled.
        if BulkJob.objects.filter(pk=job_id, status=BulkJobStatus.DONE,
                                  phase=BulkJobPhase.APPLYING).update(
                status=BulkJobStatus.RUNNING, cursor=0, lease_until=None, finished_at=None):
            logger.warning("bulk job %s was marked done with runs still waiting for its "
                           "approval (a worker of the release before); applying it", job_id)
            reopened.append(job_id)
    return reopened


def ask_second_person(job: BulkJob, waiting: list[int]) -> None:
    """At the end of job `job`'s acting: its one four-eyes request for the runs `waiting`
    for a second person, in its person's name, for those they may still act on. The person
    is read from the database now, with the action's permission (runs.permissions.grant_for,
    the rule run_access asks of each run), not from the job's object: a person deactivated
    while the job ran may act on no run, and one whose permission was taken away (globally,
    or on a run's workflow) on none of those runs, so approving a request in their name
    could do nothing there, run by run. Such runs get no request: each is told forbidden,
    with why (naming the job's person alone) and what to do."""
    person = get_user_model().objects.filter(pk=job.requested_by_id).first()
    spec = ACTIONS[job.action]
    if person is None or not person.is_active:
        name = job.requested_by.get_username()
        _refuse_waiting(job, waiting, f"{name}'s account is no longer active, so no approval "
                        "is asked in their name")
        return
    grant = grant_for(person, spec.permission)
    if not grant.everywhere:
        lost = Run.objects.filter(pk__in=waiting).exclude(
            workflow_id__in=grant.workflow_ids).values_list("pk", flat=True)
        _refuse_waiting(job, lost, f"{person.get_username()} may no longer "
                        f"{spec.label.lower()} it (needs runs.{spec.permission}), so no "
                        "approval is asked for it")
        waiting = list(BulkOutcome.objects.filter(job=job, outcome=Outcome.SECOND_PERSON)
                       .order_by("run_id").values_list("run_id", flat=True))
    if waiting:
        request_bulk_operator_action(job, waiting)


def _refuse_waiting(job: BulkJob, run_ids, why: str) -> None:
    """The runs of `run_ids` that wait for job `job`'s second person, told forbidden
    because `why` (no request is opened for them)."""
    refused = BulkOutcome.objects.filter(job=job, run_id__in=run_ids,
                                         outcome=Outcome.SECOND_PERSON).update(
        outcome=Outcome.FORBIDDEN, at=timezone.now(), message=(
            f"not acted on: it needs a second person, and {why}; a person who may act can "
            "start the job again"))
    if refused:
        logger.info("bulk job %s: %d runs needed a second person; no request opened for "
                    "them: %s", job.pk, refused, why)


def waiting_runs(job: BulkJob, limit: int) -> list[int]:
    """The next `limit` runs of the job, after its cursor, that wait for the approval."""
    return list(BulkOutcome.objects.filter(job=job, outcome=Outcome.SECOND_PERSON,
                                           run_id__gt=job.cursor)
                .order_by("run_id").values_list("run_id", flat=True)[:limit])


def apply_one(job: BulkJob, run_id: int, held: datetime) -> bool:
    """The approved action on run `run_id`, once, under the lease marked `held`, with both
    people named: the requester as its actor, the approver as the second person; refused
    (and said on the run's outcome row) where the requester may no longer take it or the
    run's state no longer allows it. False, with nothing done, if the job is no longer this
    worker's. `job.approval`: the approved request."""
    try:
        with transaction.atomic(durable=True):
            # The run first, then the job: the order an acting worker locks them in (its
            # guard is checked with the run locked, operator_actions.act).
            run = lock_run(run_id)
            hold(job.pk, held)
            if not BulkOutcome.objects.select_for_update().filter(
                    job=job, run_id=run_id, outcome=Outcome.SECOND_PERSON).exists():
                return True  # done before this worker came to it
            outcome, message = ((Outcome.REFUSED, "after approval: the run no longer "
                                 "exists") if run is None else _approved_action(job, run_id))
            finish_row(job, run_id, outcome, message)
            crashpoints.reach("bulk_applied", str(run_id))
    except LeaseLost:
        return False
    except OperationalError as exc:
        if not would_not_wait(exc):
            raise
        finish_row(job, run_id, Outcome.REFUSED, "after approval: another session held the "
                   "run too long; nothing was done to it: act on it again",
                   was=Outcome.SECOND_PERSON)
    return True


def _approved_action(job: BulkJob, run_id: int) -> tuple[str, str]:
    approval, spec = job.approval, ACTIONS[job.action]
    refusal = requester_refusal(job.requested_by, job.action, run_id)
    if refusal is not None:
        return Outcome.FORBIDDEN, f"after approval: {refusal}"
    approved_by = decider(approval)
    try:
        # The transition's record carries the decision's id, as a one-run approval's does.
        with transaction.atomic(), transitions.within_caller_transaction(), \
                transitions.applying_decision(str(approval.decision_id or "")):
            # A step action (a re-run from a step) aims at the same step as when it waited.
            spec.perform(run_id, actor=requester_actor(approval), approved_by=approved_by,
                         given=job_input(job, run_id))
    except (TransitionNotAllowed, ActionInputError) as exc:
        return Outcome.REFUSED, f"after approval: {exc}"
    # As when one person acts (operator_actions.act): a wait the action ended loses its
    # request now, not at the sweep's next full look.
    withdraw_unawaited_of(run_id)
    return Outcome.DONE, f"{spec.label}: done, approved by {approved_by.label}"
