"""Applying a recorded decision to its run: a person's, or the system's when nobody
decided in time (a timeout), in the transaction that records it, or later by the sweep.

A decision goes back to the run through runs' transitions (decide_approval,
approval_timed_out; decide_tool_call for an agent's tool call, with the hash of the
arguments the request showed: the transition alone decides whether that still stands), or
for an operator action through runs.operator.actions. They run inside the caller's
transaction (runs.machine.transitions.within_caller_transaction), in a savepoint: a refusal
or an error writes nothing to the run. A refusal that will pass (the run is passing through
queued or running) or an error keeps the decision recorded and unsettled, and the sweep
applies it later (`apply_pending_decisions`). The run's records carry the decision's id,
and that id (never a message's text) tells whether a decision was already applied.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from runs import store
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import Run, RunStatus, Step, StepStatus, ToolCall, ToolCallStatus
from runs.operator.actions import ACTIONS, ActionInput

from .backoff import retry_delay
from .bulk_approved import approve_job
from .four_eyes import SYSTEM_LABEL, decider, requester_actor, requester_refusal
from .models import DECIDED_STATUSES, ApprovalRequest, RequestKind, RequestStatus
from .requests import lock_run, record_lifecycle
from .timeouts import TIMED_OUT, judged_at, time_out
from .withdrawal import REFUSED, mark_settled, withdraw_unawaited_of

logger = logging.getLogger(__name__)

SYSTEM = Actor.system(SYSTEM_LABEL)

# Where a recorded decision stands with its run (application_of).
APPLIED = "applied"
# Recorded, not applied yet: the sweep applies it when its retry is due.
PENDING = "pending"
# Recorded, and the run cannot take it (the run was terminated meanwhile): settled so.
NOT_APPLIED = "not_applied"
# How apply_error begins for a decision the database interrupted as it was applied (a
# statement cancelled, the connection lost, a deadlock): tried again, it goes through.
INTERRUPTED = "the database interrupted it"
# How apply_error begins for a refusal that will pass (_refusal_is_passing); one that will
# not settles the request with withdrawal.REFUSED.
NOT_YET = "not applied yet: "


def application_of(approval: ApprovalRequest) -> str:
    """APPLIED, PENDING or NOT_APPLIED, for a request with a decision recorded."""
    if approval.settled_at is None:
        return PENDING
    return NOT_APPLIED if approval.apply_error else APPLIED


def pending_reason(approval: ApprovalRequest) -> tuple[str, bool]:
    """Why a recorded decision is not applied yet, in words for the person who decided, and
    whether trying again will apply it (False: an unexpected error, which is logged)."""
    error = approval.apply_error
    if error.startswith(NOT_YET):
        return error.removeprefix(NOT_YET), True
    if error.startswith(INTERRUPTED):
        return INTERRUPTED, True
    return "applying it failed unexpectedly; the error is logged", False


def apply_to_run(request_id: int, *, now: datetime | None = None) -> bool:
    """Apply a recorded decision that is not applied yet (the sweeper calls this) and mark
    the request settled, in one transaction, dated by the database's clock as the run is
    locked (timeouts.judged_at; `now`, a test's time, stands in). True once settled."""
    run_id = ApprovalRequest.objects.filter(pk=request_id).values_list("run_id", flat=True)
    with transaction.atomic(durable=True):
        if (run := lock_run(run_id.get(), skip_held=True)) is None:
            return False  # held by another transaction: the next pass applies it
        now = judged_at(now, run)
        approval = ApprovalRequest.objects.select_for_update(of=("self",)).select_related(
            "run").get(pk=request_id)
        if approval.settled_at is not None or approval.status not in DECIDED_STATUSES:
            return approval.settled_at is not None
        return apply_decision(approval, now)


def apply_timeout(approval: ApprovalRequest, now: datetime) -> str:
    """The one way a request's timeout is applied, whoever finds it due first: the sweep,
    or a person deciding after its due time (approvals.timeouts). Inside the caller's
    transaction, with the run and then the request locked, pending and due. Escalated
    (timeouts.ESCALATED), the request waits for the deputies too; timed out
    (timeouts.TIMED_OUT), the system's decision is recorded on the request and applied to
    the run in this same transaction, as a person's decision is."""
    outcome = time_out(approval, now)
    if outcome == TIMED_OUT:
        apply_decision(approval, now)
    return outcome


def apply_decision(approval: ApprovalRequest, now: datetime) -> bool:
    """Inside the caller's transaction, with the run and the request locked: apply the
    decision to the run (a savepoint: a refusal or an error writes nothing to the run) and
    record on the request, its row and `approval`, how that went. A refusal that will not
    change (the run was terminated meanwhile) settles the request with the reason in
    apply_error: the decision stays recorded. True once settled.

    An error the savepoint cannot undo (the savepoint itself, or the rollback to it,
    cancelled by the database) leaves the caller's transaction aborted: it is raised, so
    that the caller's transaction is rolled back whole, never written in after the error."""
    if _already_applied(approval):
        return _mark_applied(approval, now, "")
    within = False
    try:
        with transaction.atomic(), transitions.within_caller_transaction():
            # The savepoint is made: an error from here on is rolled back to it, unless
            # the rollback itself fails (then Django marks the transaction for rollback).
            within = True
            _apply(approval, now)
    except Exception as exc:
        if not within or transaction.get_rollback():
            raise
        return _not_applied(approval, exc, now)
    return _mark_applied(approval, now, "")


def _not_applied(approval: ApprovalRequest, exc: Exception, now: datetime) -> bool:
    """Record on the request why `exc` kept the decision from the run (its savepoint rolled
    back): tried again later, or settled as refused for good."""
    if isinstance(exc, (OperationalError, InterfaceError)):
        # A statement cancelled, the connection lost, a deadlock: nothing wrong with the
        # decision, and the next try applies it.
        logger.warning("approval request %s: the database interrupted applying the "
                       "decision (%s: %s); the sweep applies it", approval.pk,
                       type(exc).__name__, exc)
        return _retry_later(approval, f"{INTERRUPTED} ({type(exc).__name__}: {exc})", now)
    if not isinstance(exc, TransitionNotAllowed):
        logger.error("approval request %s: applying the decision failed", approval.pk,
                     exc_info=exc)
        return _retry_later(approval, f"{type(exc).__name__}: {exc}", now)
    if _refusal_is_passing(approval):
        return _retry_later(approval, f"{NOT_YET}{exc}", now)
    logger.warning("approval request %s: not applied: %s", approval.pk, exc)
    if approval.kind == RequestKind.OPERATOR_ACTION:
        # Approved, yet the action is not taken (its requester lost the right to it, the
        # run moved on): the run's log says who approved and why nothing followed.
        record_lifecycle(approval, AuditAction.APPROVAL_DECIDED, now,
                         reason=approval.comment, actor=decider(approval),
                         decision=approval.status, taken=False, not_applied=str(exc),
                         decision_id=str(approval.decision_id or ""))
    return _mark_applied(approval, now, f"{REFUSED}{exc}")


def apply_pending_decisions(*, now: datetime | None = None, limit: int = 200) -> int:
    """Apply decisions that were claimed but not applied (the process died in between, or
    the run was passing through another state), due by the database's clock (`now`, a
    test's time, stands in for it). Returns how many settled."""
    due = ApprovalRequest.objects.filter(settled_at__isnull=True, status__in=DECIDED_STATUSES,
                                         apply_after__lte=store.time_in_statement(now))
    return sum(apply_to_run(pk, now=now) for pk in
               list(due.order_by("apply_after").values_list("pk", flat=True)[:limit]))


def _apply(approval: ApprovalRequest, now: datetime) -> None:
    if approval.kind == RequestKind.OPERATOR_ACTION:
        if approval.status != RequestStatus.APPROVED:
            # Rejected, or nobody decided in time: the action is not taken, and the run's
            # log says so, and who decided (recognised by the decision's id if applied again).
            record_lifecycle(approval, AuditAction.APPROVAL_DECIDED, now,
                             reason=approval.comment, actor=decider(approval),
                             decision=approval.status, taken=False,
                             decision_id=str(approval.decision_id or ""))
            return
        # The same action, through the same table and transition, as the operator asked
        # for; the transition checks again that the approver is a second person.
        requester = requester_actor(approval)
        with transitions.applying_decision(str(approval.decision_id or "")):
            if approval.params.get("bulk_job"):
                # One request for the runs of a bulk job that needed a second person: the
                # job's worker takes the action on each (each run checked against the
                # requester's permission there), not this transaction, whose time grows
                # with the runs.
                approve_job(approval.params["bulk_job"], approval)
                return
            refusal = requester_refusal(approval.requested_by, approval.action,
                                        approval.run_id)
            if refusal is not None:
                raise TransitionNotAllowed(refusal)
            ACTIONS[approval.action].perform(
                approval.run_id, actor=requester, approved_by=decider(approval),
                given=ActionInput(reason=approval.snapshot.get("reason", ""),
                                  step=dict(approval.params).get("step", "")))
        # As when one person acts (operator_actions.act): a wait the action ended loses its
        # request now, not at the sweep's next full look.
        withdraw_unawaited_of(approval.run_id, now)
        return
    if approval.kind == RequestKind.TOOL_CALL:
        # The one rule of tool call approvals (the call still waits, with arguments of
        # exactly this hash) is the transition's: a refusal comes back as
        # TransitionNotAllowed and is recorded on the request. Nobody deciding in time
        # declines the call: it never runs, and the model is told.
        approved = approval.status == RequestStatus.APPROVED
        transitions.decide_tool_call(
            approval.run_id, step_name=approval.step_name,
            call_ref=approval.params.get("tool_call", ""),
            args_hash=approval.params.get("args_hash", ""), approved=approved,
            call_id=approval.tool_call_id, actor=decider(approval), comment=approval.comment,
            data={"approval_request": approval.pk, "payload_hash": approval.snapshot_hash,
                  "decision_id": str(approval.decision_id or "")}, now=now)
        return
    if approval.status == RequestStatus.EXPIRED:
        transitions.approval_timed_out(approval.run_id, step_name=approval.step_name,
                                       actor=SYSTEM, reason=approval.comment, now=now)
        return
    transitions.decide_approval(approval.run_id, step_name=approval.step_name,
                                approved=approval.status == RequestStatus.APPROVED,
                                actor=decider(approval), comment=approval.comment,
                                data={"approval_request": approval.pk,
                                      "payload_hash": approval.snapshot_hash,
                                      "decision_id": str(approval.decision_id or "")},
                                now=now)


def _refusal_is_passing(approval: ApprovalRequest) -> bool:
    """A run passing through queued or running (an operator resumed it) comes back to
    waiting on the same step: the decision is applied then."""
    if approval.kind == RequestKind.TOOL_CALL:
        call = _call(approval)
        return (call is not None and call.status == ToolCallStatus.WAITING
                and call.step.run.status in (RunStatus.QUEUED, RunStatus.RUNNING))
    if approval.kind != RequestKind.STEP:
        return False
    run = Run.objects.get(pk=approval.run_id)
    step = Step.objects.filter(run=run, name=approval.step_name).first()
    return (step is not None and step.status == StepStatus.WAITING
            and run.status in (RunStatus.QUEUED, RunStatus.RUNNING))


def _already_applied(approval: ApprovalRequest) -> bool:
    """Whether the run's records already hold this decision, recognised by its id."""
    return approval.decision_id is not None and AuditRecord.objects.filter(
        run_id=approval.run_id, data__decision_id=str(approval.decision_id)).exists()


def _call(approval: ApprovalRequest) -> ToolCall | None:
    return (ToolCall.objects.select_related("step__run").filter(pk=approval.tool_call_id)
            .first() if approval.tool_call_id else None)


def _mark_applied(approval: ApprovalRequest, now: datetime, error: str) -> bool:
    mark_settled(approval, now, error)
    return True


def _retry_later(approval: ApprovalRequest, error: str, now: datetime) -> bool:
    attempts = approval.apply_attempts + 1
    delay = retry_delay(settings.APPROVALS_SETTLE_RETRY_SECONDS, attempts)
    ApprovalRequest.objects.filter(pk=approval.pk, settled_at__isnull=True).update(
        apply_attempts=attempts, apply_error=error,
        apply_after=now + timedelta(seconds=delay))
    approval.apply_attempts, approval.apply_error = attempts, error
    approval.apply_after = now + timedelta(seconds=delay)
    return False
