"""When a pending request can no longer be decided, and its withdrawal.

One rule for both places that meet such a request: the sweep, which withdraws what it finds,
and a person's decision, which withdraws the request it was about to record instead of
recording a decision nobody can apply (a tool call cancelled a moment before, a run
terminated). Which of the two comes first changes nothing.
"""

import logging
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.db.models.lookups import Exact, In

from audit.actions import AuditAction
from audit.chain import Actor
from runs import store
from runs.machine.endings import ending_of
from runs.machine.transitions import RUN_TRANSITIONS
from runs.models import (
    ATTENTION_RUN_STATUSES,
    FINAL_RUN_STATUSES,
    Run,
    RunStatus,
    Step,
    StepStatus,
    ToolCall,
    ToolCallStatus,
)

from .models import (
    BULK_JOB_REQUESTS,
    DECIDED_STATUSES,
    ApprovalRequest,
    BulkJob,
    BulkJobStatus,
    BulkOutcome,
    RequestKind,
    RequestStatus,
)
from .requests import lock_run, record_lifecycle
from .waits import call_still_waiting, step_still_waiting

logger = logging.getLogger(__name__)

# Run states held for a person, or compensating: an operator's action from one of these
# leaves the run's pending requests as they are (the same wait's, taken up again when the
# run is resumed); from any other it may end a wait, or bring back a run whose end left
# requests pending (operator_actions.act withdraws them at once).
HELD_WITH_ITS_REQUESTS = [*ATTENTION_RUN_STATUSES, RunStatus.COMPENSATING]
# How apply_error begins for a recorded decision its run can no longer take: the request is
# settled with it, the decision kept as recorded.
REFUSED = "not applied: "
# Run states in which a pending request for one of its steps can no longer be decided.
# (Queued and running are passing states: a run in them with its step still waiting goes
# back to waiting on it.)
NOT_WAITING_STATUSES = [*HELD_WITH_ITS_REQUESTS, *FINAL_RUN_STATUSES]


def no_longer_awaited() -> Q:
    """The requests (pending or not: callers filter) whose run no longer waits for their
    decision: it stopped waiting on the step or the tool call (terminated, compensated,
    decided or settled by an operator), the call was cancelled, for an operator action on
    one run, the run is final and the action's transition cannot start from its state, or,
    for a bulk job's, the job was cancelled or every run it waits for is so. And any
    operator action's whose requester can no longer act: their account was deactivated (or
    removed) since they asked, so an approval could take the action in their name on no
    run (four_eyes.requester_refusal would refuse it run by run)."""
    # A call a person cancelled is never decided, whatever its run does meanwhile.
    call_cancelled = ToolCall.objects.filter(pk=OuterRef("tool_call_id"),
                                             status=ToolCallStatus.CANCELLED)
    run_status = _run_status()
    return ((Q(kind=RequestKind.STEP) & (~Exists(step_still_waiting())
                                         | In(run_status, NOT_WAITING_STATUSES)))
            # A call decided elsewhere while its run goes on (queued, running) may be
            # followed by the model's next proposal: that supersedes the request.
            | (Q(kind=RequestKind.TOOL_CALL)
               & ((~Exists(call_still_waiting()) & Exact(run_status, RunStatus.WAITING))
                  | In(run_status, NOT_WAITING_STATUSES) | Exists(call_cancelled)))
            | (Q(kind=RequestKind.OPERATOR_ACTION) & ~BULK_JOB_REQUESTS
               & _action_refused_for_good(run_status))
            | (Q(kind=RequestKind.OPERATOR_ACTION) & ~Exists(_requester_active()))
            # A bulk job's request only hangs on its first run: approved, it acts on every
            # run of the job, each refused there if it can no longer take the action
            # (bulk_approved.apply_one). That one run's end ends no wait of the others; the
            # end of every one does. So does the job's cancel: one made as its request was
            # being made (the job names the request in the request's commit, and is done
            # only after) asked that nothing more be done.
            | (Q(kind=RequestKind.OPERATOR_ACTION) & BULK_JOB_REQUESTS
               & (_no_run_of_the_job_may_take_it()
                  | Exists(BulkJob.objects.filter(approval_id=OuterRef("pk"),
                                                  status=BulkJobStatus.CANCELLED)))))


def _run_status() -> Subquery:
    # The status of the run of the row asking (a request, a bulk job's outcome), looked up
    # by primary key for each row. Not a join: with one the planner may walk the whole runs
    # table (along its primary key, or into a hash) to find the few runs of the pending
    # requests, and the sweep asks this every pass (tests/approvals/test_the_withdrawal_
    # search_costs_the_pending_requests_not_the_runs_table.py).
    return Subquery(Run.objects.filter(pk=OuterRef("run_id")).values("status")[:1])


def _requester_active():
    # The request's requester, if their account (still there) is active: looked up by
    # primary key for each request, as the run's status is.
    return get_user_model().objects.filter(pk=OuterRef("requested_by_id"), is_active=True)


def _requester_gone(approval: ApprovalRequest) -> str | None:
    """Why `approval`'s requester can no longer have its operator action taken in their
    name (their account), or None (not an operator action's, or they still may)."""
    if approval.kind != RequestKind.OPERATOR_ACTION:
        return None
    requester = get_user_model().objects.filter(pk=approval.requested_by_id).first()
    if requester is None:
        return "the account of the person who asked for it no longer exists"
    if not requester.is_active:
        return (f"{requester.get_username()}, who asked for it, can no longer act: their "
                "account is no longer active")
    return None


def _action_refused_for_good(run_status: Subquery, action=None) -> Q:
    # An operator action waits for its second person while the run is in a state its
    # transition cannot start from only if the run may still come back to one (a resumed
    # run passes through queued and running); a final run never does. Some actions start
    # from final states (re-run from a step, reopen): their requests stand there. `action`:
    # where the action is named (the request's own, by default).
    action = F("action") if action is None else action
    refused = Q()
    for status in sorted(FINAL_RUN_STATUSES):
        starting = [name for name, move in RUN_TRANSITIONS.items() if status in move.sources]
        refused |= Exact(run_status, status) & ~In(action, starting)
    return refused


def _no_run_of_the_job_may_take_it() -> Q:
    # A bulk job's request waits while one of the runs it would act on may still take the
    # action (as a request about one run does): once every one has ended where the action
    # cannot start, an approval has nothing left to do.
    still_possible = BulkOutcome.objects.filter(
        job__approval_id=OuterRef("pk"), outcome=BulkOutcome.Outcome.SECOND_PERSON,
    ).exclude(_action_refused_for_good(_run_status(), OuterRef(OuterRef("action"))))
    return ~Exists(still_possible)


def is_still_awaited(approval: ApprovalRequest) -> bool:
    """Whether the run still waits for this request's decision (a read: the request page
    offers no form for one it no longer waits for)."""
    return not ApprovalRequest.objects.filter(no_longer_awaited(), pk=approval.pk).exists()


def unawaited_reason(approval: ApprovalRequest) -> str:
    """Why the run no longer waits for `approval`'s decision, in words: the reason a
    withdrawal records, and what the request's page says of one not withdrawn yet."""
    run = approval.run
    job = BulkJob.objects.filter(approval_id=approval.pk, status=BulkJobStatus.CANCELLED) \
        .select_related("cancelled_by").first()
    if job is not None:
        by = f" by {job.cancelled_by.get_username()}" if job.cancelled_by else ""
        return f"bulk job {job.pk} was cancelled{by}: nothing more is done for it"
    if (gone := _requester_gone(approval)) is not None:
        return f"{gone}; nothing is done in their name"
    if approval.is_bulk:
        return (f"every run of bulk job {approval.params['bulk_job']} that waited for this "
                f"decision has ended where {approval.action} cannot be taken")
    if (ended := ending_of(run)) is not None:
        # An ended run's steps and calls keep the status they had (terminate leaves an
        # approval step `waiting`): naming them would claim a wait that is over. A cancelled
        # run is terminated too: what ended it is said, not its status; so is one a person
        # ended while an effect was unsettled, in attention until each is settled.
        return f"the run ended: {ended}"
    step = Step.objects.filter(run_id=approval.run_id, name=approval.step_name).first()
    call = (ToolCall.objects.filter(pk=approval.tool_call_id).first()
            if approval.tool_call_id else None)
    # A step or call still `waiting` says nothing of why the run stopped waiting for this
    # decision (the run's own status does): only what became of them is named.
    facts = [f"run {run.status}"]
    if step is not None and step.status != StepStatus.WAITING:
        facts.append(f"step {step.status}")
    if call is not None and call.status != ToolCallStatus.WAITING:
        facts.append(f"tool call {call.ref} {call.status}")
    return f"the run no longer waits for this decision ({', '.join(facts)})"


def withdraw(approval: ApprovalRequest, now: datetime, *, actor: Actor | None = None) -> None:
    """Withdraw `approval`, pending and locked by the caller's transaction, with what became
    of its run, step and call as the reason, and record it on the run. `actor`: the person
    whose own act the withdrawal follows from in the same transaction (their decision found
    the request nobody can decide, and held its run: unreadable.hold_for_the_key), whom the
    record names as the hold's names them; the approvals system otherwise."""
    approval.status = RequestStatus.WITHDRAWN
    approval.settled_at = now
    approval.next_reminder_at = None
    approval.comment = unawaited_reason(approval)
    approval.save(update_fields=["status", "settled_at", "next_reminder_at", "comment"])
    record_lifecycle(approval, AuditAction.APPROVAL_WITHDRAWN, now, reason=approval.comment,
                     actor=actor)
    logger.info("approval request %s withdrawn: %s", approval.pk, approval.comment)


def withdraw_unawaited_of(run_id: int, now: datetime | None = None) -> int:
    """Withdraw now the pending requests of run `run_id` that it no longer waits for: those
    an operator's action has just ended (a cancelled tool call's, a terminated run's), so
    that none is left for the run's next request to supersede under another reason before
    the sweep comes by. A decision recorded on such a wait and left for the sweep to apply
    (the run was passing through queued or running) is settled now as not applied: once
    the run was reopened and resumed, the sweep would find the same step waiting again and
    apply to that new wait a decision made before the run ended. In the caller's
    transaction, or one of its own; dated by the database's clock as the run is locked
    (`now`, a caller's time, stands in). How many were withdrawn."""
    with transaction.atomic():
        # The run first, then its requests; the time read with its lock dates them.
        now = store.time_of_lock(lock_run(run_id), given=now)
        # Pending ones, and decided ones not yet applied, in one read (an operator's action
        # pays it). An operator action's decision is the action's own to refuse when
        # applied (application.apply_decision), whatever the run's state.
        unawaited = list(
            ApprovalRequest.objects.select_for_update(of=("self",)).select_related("run")
            .filter(no_longer_awaited(), run_id=run_id)
            .filter(Q(status=RequestStatus.PENDING)
                    | (Q(status__in=DECIDED_STATUSES, settled_at__isnull=True)
                       & ~Q(kind=RequestKind.OPERATOR_ACTION))))
        pending = [a for a in unawaited if a.status == RequestStatus.PENDING]
        # Told apart before any is withdrawn: withdraw() changes the status in hand, and a
        # request withdrawn here had no decision to say was not applied.
        decided = [a for a in unawaited if a.status != RequestStatus.PENDING]
        for approval in pending:
            withdraw(approval, now)
        for approval in decided:
            _settle_unapplied(approval, now)
    return len(pending)


def _settle_unapplied(approval: ApprovalRequest, now: datetime) -> None:
    why = unawaited_reason(approval)
    mark_settled(approval, now, f"{REFUSED}{why}")
    logger.warning("approval request %s: its decision (%s) was not applied: %s", approval.pk,
                   approval.status, why)


def mark_settled(approval: ApprovalRequest, now: datetime, error: str) -> None:
    """A decision is settled: applied (`error` empty) or refused for good (`error` begins
    with REFUSED), never to be applied again. The sweep's application and the withdrawal of
    a decision made before its wait ended both end here; a request settled already keeps
    its settlement."""
    ApprovalRequest.objects.filter(pk=approval.pk, settled_at__isnull=True).update(
        settled_at=now, apply_error=error, apply_after=None)
    # The caller tells the person from these, not from a read after its commit.
    approval.settled_at, approval.apply_error, approval.apply_after = now, error, None
