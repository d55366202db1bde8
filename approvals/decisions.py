"""Decisions: a person's approve or reject, recorded on the request and applied to the run
in the same transaction.

A decision goes back to the run through runs' transitions (decide_approval,
approval_timed_out; decide_tool_call for an agent's tool call, with the hash of the
arguments the request showed: the transition alone decides whether that still stands), or
for an operator action through runs.operator.actions. They run inside the decision's transaction
(runs.machine.transitions.within_caller_transaction): the run is locked first, as every transition
locks it, then the request; the decision is recorded, applied, and the request marked
settled, all in one commit. A crash anywhere in between leaves neither. A refusal that
will pass (the run is passing through queued or running) or an unexpected error keeps the
decision recorded and unsettled, and the sweeper applies it later (`apply_pending_decisions`).
The run's records carry the decision's id, and that id (never a message's text) tells
whether a decision was already applied.

Every function takes an optional `now` so tests drive the schedules with a controlled clock;
all state lives in the database, so a restart changes nothing.
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from audit.redaction import redact_text
from runs import store
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.machine.storable import person_text_problem
from runs.models import (
    Run,
    RunStatus,
    Step,
    StepStatus,
    ToolCall,
    ToolCallStatus,
)
from runs.operator.actions import ACTIONS, ActionInput

from .backoff import retry_delay
from .bulk import apply_approved
from .four_eyes import changed_effects_snapshot, requester_actor, requester_refusal
from .models import DECIDED_STATUSES, ApprovalRequest, RequestKind, RequestStatus
from .notifications import time_text
from .permissions import decide_refusal, permissions_read_once
from .requests import current_snapshot, lock_run, record_lifecycle, supersede
from .snapshots import SnapshotUnavailable
from .timeouts import (
    TIMED_OUT,
    is_due,
    judged_at,
    late_decision_refusal,
    time_out,
    timed_out,
)
from .withdrawal import is_still_awaited, withdraw, withdraw_unawaited_of

logger = logging.getLogger(__name__)

SYSTEM_LABEL = "approvals"
SYSTEM = Actor.system(SYSTEM_LABEL)
# The outcome of a decision refused because its decision id names another decision (the
# API answers it as a 409 with this error code, the console as an error).
DECISION_ID_REUSED = "decision_id_reused"


class DecisionRefused(ValueError):
    """A decision that cannot be recorded as given; nothing was recorded. `field` names
    what is missing or wrong (the comment)."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


def decision_refusal(*, approved: bool, comment: str) -> str | None:
    """Why a decision cannot be recorded as given, or None. A rejection says why: the
    requester and the run's audit trail are told nothing else. The console's form words
    its field error with this, and `decide` refuses by it for every other caller."""
    if not approved and not (comment or "").strip():
        return "The comment is missing: a rejection needs one. Say why you reject it."
    if comment and (problem := person_text_problem(comment)) is not None:
        return f"The comment is {problem}."
    return None


@dataclass(frozen=True)
class Decision:
    """What became of a person's decision, with a sentence to show them."""

    # recorded, already_recorded, already_decided, closed, superseded, unavailable,
    # decision_id_reused
    outcome: str
    message: str
    request: ApprovalRequest
    new_request: ApprovalRequest | None = None

    @property
    def recorded(self) -> bool:
        return self.outcome == "recorded"


def decide(request_id: int, *, user, approved: bool, decision_id: uuid.UUID | str,
           comment: str = "", now: datetime | None = None) -> Decision:
    """Record `user`'s decision on request `request_id` and apply it to the run.

    Raises DecisionRefused for a decision that cannot be recorded as given (a rejection
    without a comment: decision_refusal), PermissionDenied (and logs it) if `user` may not
    decide, and ApprovalRequest.DoesNotExist for an unknown id; nothing changes in any case.
    Otherwise nothing changes either unless the returned Decision is `recorded`:
    - the same decision_id again, with the same decision on the same request (double
      click, resent form): `already_recorded`; with another decision, or on another
      request: `decision_id_reused`, refused;
    - decided already by someone else (the first of two racing approvers wins):
      `already_decided`, saying by whom and when;
    - superseded, withdrawn or timed out: `closed`; one the run no longer waits for (its
      tool call cancelled, the run terminated) is withdrawn now and `closed`; one past its
      due time that the sweep has not timed out yet is timed out now, as the sweep would
      (apply_timeout), and `closed` (an escalation leaves it open: the decision is then
      taken as after the sweep's escalation);
    - the payload differs from the one this request shows: the request is superseded, a
      new one is made and notified, and this decision is refused (`superseded`): an
      approval never applies to a payload it did not see;
    - the payload cannot be computed now: `unavailable`.
    """
    # Checked before the lock and under it: the grants read once for both.
    with permissions_read_once(user):
        return _decide(request_id, user=user, approved=approved, decision_id=decision_id,
                       comment=comment, now=now)


def _decide(request_id: int, *, user, approved: bool, decision_id: uuid.UUID | str,
            comment: str, now: datetime | None) -> Decision:
    approval = ApprovalRequest.objects.select_related("run").get(pk=request_id)
    # Who may not decide hears nothing of what they sent: refused before the comment is
    # looked at (and again under the lock below, where the request's state is sure).
    deny_who_may_not_decide(user, approval)
    if (refusal := decision_refusal(approved=approved, comment=comment)) is not None:
        raise DecisionRefused("comment", refusal)
    decision_id = uuid.UUID(str(decision_id))
    # Kept on the request, the run's chain and the approvals page: a credential pasted
    # into it is masked first, as an operator's reason is (runs.operator.actions).
    comment = redact_text((comment or "").strip())
    # A step's payload is recomputed before the transaction: it reads the run's results
    # and calls the step's snapshot function, neither of which should hold the request's
    # lock. The comparison happens under the lock below; a change in between is caught by
    # the next reminder or the next decision, never applied as approved. (An operator
    # action's effects are read under the lock: _decide_locked.)
    current = None
    if approval.is_pending and approval.kind == RequestKind.STEP:
        current = current_snapshot(approval)
    try:
        closed = _decide_locked(request_id, approval.run_id, user=user, approved=approved,
                                decision_id=decision_id, comment=comment, current=current,
                                now=now)
    except IntegrityError:
        # The same decision id sent with decisions on two requests at once: both found it
        # unused (the check reads committed decisions), and the unique index refused the
        # second as the first committed. Nothing of it was written: refused as a reuse.
        approval = ApprovalRequest.objects.select_related("run").get(pk=request_id)
        if (reused := _decision_id_reuse(approval, decision_id, approved)) is None:
            raise
        return Decision(DECISION_ID_REUSED, reused, approval)
    if closed is not None:
        return closed
    approval = ApprovalRequest.objects.get(pk=request_id)
    message = f"Your decision ({approval.status}) is recorded."
    if approval.apply_error:
        message += f" It could not be applied to the run: {approval.apply_error}"
    return Decision("recorded", message, approval)


def _decide_locked(request_id: int, run_id: int, *, user, approved: bool,
                   decision_id: uuid.UUID, comment: str, current,
                   now: datetime | None) -> Decision | None:
    """decide's one transaction: the decision recorded and applied, and None; or what
    became of it instead (nothing recorded) as a Decision."""
    with transaction.atomic(durable=True):
        # The run first, then the request: the order every transition locks in.
        locked = lock_run(run_id)
        # Whether it came before the due time is judged by the database's clock as the run
        # was locked (a caller's given time aside), as the sweep judges it (timeouts.
        # judged_at): this process's estimate of that clock runs ahead or behind for a
        # while after its own clock stepped, and would refuse a decision made in time.
        now = judged_at(now, locked)
        approval = ApprovalRequest.objects.select_for_update(of=("self",)).select_related(
            "run").get(pk=request_id)
        deny_who_may_not_decide(user, approval)
        if (reused := _decision_id_reuse(approval, decision_id, approved)) is not None:
            return Decision(DECISION_ID_REUSED, reused, approval)
        if approval.decision_id == decision_id:
            return Decision("already_recorded",
                            f"Your decision ({approval.status}) was already recorded at "
                            f"{time_text(approval.decided_at)}; nothing changed.", approval)
        if not approval.is_pending:
            return _closed(approval)
        if not is_still_awaited(approval):
            # The run stopped waiting for it (the call was cancelled, the run terminated)
            # and the sweep has not come by yet: withdrawn now, as the sweep would, and no
            # person is recorded as deciding what nobody can apply.
            withdraw(approval, now)
            return _closed(approval)
        if is_due(approval, now) and apply_timeout(approval, now) == TIMED_OUT:
            # Past its due time and the sweep has not come by yet (it may be late or
            # stopped): nobody decided in time, whoever clicks now. Timed out here, as the
            # sweep would have, so the run goes the same way whichever comes first.
            return _closed(approval)
        if approval.kind == RequestKind.OPERATOR_ACTION:
            # Rows only, read with the run locked: an effect settled by a transition this
            # decision waited for is one the second person was never shown.
            current = changed_effects_snapshot(approval)
        if isinstance(current, SnapshotUnavailable):
            return Decision("unavailable", f"What this request asks about cannot be checked "
                            f"now ({current}); nothing was decided. Try again later.", approval)
        if current is not None and current[1] != approval.snapshot_hash:
            new = supersede(approval, *current, now)
            return Decision(
                "superseded",
                f"The payload changed since this request was made, so it was replaced by "
                f"request {new.pk}; nothing was approved or rejected. Review the new "
                "request.", approval, new)
        approval.status = RequestStatus.APPROVED if approved else RequestStatus.REJECTED
        approval.decided_by = user
        approval.decided_by_label = user.get_username()
        approval.decided_at = now
        approval.decision_id = decision_id
        approval.comment = comment
        approval.apply_after = now + timedelta(seconds=settings.APPROVALS_SETTLE_RETRY_SECONDS)
        approval.save(update_fields=["status", "decided_by", "decided_by_label", "decided_at",
                                     "decision_id", "comment", "apply_after"])
        _apply_and_close(approval, now)
    return None


def deny_who_may_not_decide(user, approval: ApprovalRequest) -> None:
    """Raise PermissionDenied, saying why (decide_refusal), and log it, if `user` may not
    decide `approval`: decide's check, and the API's before it reads a body."""
    if (refusal := decide_refusal(user, approval)) is not None:
        logger.warning("approval request %s: %s (id %s) may not decide it; refused",
                       approval.pk, user.get_username(), user.pk)
        raise PermissionDenied(refusal)


def _decision_id_reuse(approval: ApprovalRequest, decision_id: uuid.UUID,
                       approved: bool) -> str | None:
    """Why `decision_id` cannot be taken for this decision, or None. A decision id names one
    decision on one request: sent again with the same decision on the same request it is a
    resent form (already_recorded), but answering "already recorded" to another request or
    to the opposite decision would tell the person their decision stands while nothing of
    it was written."""
    if approval.decision_id == decision_id:
        said = RequestStatus.APPROVED if approved else RequestStatus.REJECTED
        if approval.status == said:
            return None
        return (f"Decision id {decision_id} was already used to record {approval.status} "
                f"on approval request {approval.pk}; it cannot also record {said} on it. "
                "Nothing changed: send a new decision id for a new decision.")
    used = (ApprovalRequest.objects.filter(decision_id=decision_id)
            .values_list("pk", flat=True).first())
    if used is None:
        return None
    return (f"Decision id {decision_id} was already used for a decision on approval request "
            f"{used}, not {approval.pk}; nothing changed: send a new decision id for a new "
            "decision.")


def _closed(approval: ApprovalRequest) -> Decision:
    if timed_out(approval):
        return Decision("closed", late_decision_refusal(approval), approval)
    if approval.status in (RequestStatus.APPROVED, RequestStatus.REJECTED) \
            and approval.decided_by_id is not None:
        return Decision("already_decided",
                        f"Already {approval.status} by {approval.decided_by_label} at "
                        f"{time_text(approval.decided_at)}; your decision was not recorded.",
                        approval)
    if approval.status == RequestStatus.SUPERSEDED:
        why = ("the model proposed another tool call in its place"
               if approval.kind == RequestKind.TOOL_CALL else "its payload changed")
        return Decision("closed", f"This request was replaced by request "
                        f"{approval.superseded_by_id} because {why}; nothing "
                        "was decided.", approval, approval.superseded_by)
    return Decision("closed", f"This request is {approval.status} "
                    f"({approval.comment or 'no longer waiting for a decision'}); nothing "
                    "was decided.", approval)


def _decider(approval: ApprovalRequest) -> Actor:
    if approval.decided_by_id is not None:
        return Actor(kind=AuditRecord.ActorKind.USER, label=approval.decided_by_label,
                     user_id=approval.decided_by_id)
    return Actor.system(approval.decided_by_label or SYSTEM_LABEL)


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
        return _apply_and_close(approval, now)


def apply_timeout(approval: ApprovalRequest, now: datetime) -> str:
    """The one way a request's timeout is applied, whoever finds it due first: the sweep,
    or a person deciding after its due time (approvals.timeouts). Inside the caller's
    transaction, with the run and then the request locked, pending and due. Escalated
    (timeouts.ESCALATED), the request waits for the deputies too; timed out
    (timeouts.TIMED_OUT), the system's decision is recorded on the request and applied to
    the run in this same transaction, as a person's decision is."""
    outcome = time_out(approval, now)
    if outcome == TIMED_OUT:
        _apply_and_close(approval, now)
    return outcome


def _apply_and_close(approval: ApprovalRequest, now: datetime) -> bool:
    """Inside the caller's transaction, with the run and the request locked: apply the
    decision to the run (a savepoint: a refusal writes nothing to the run) and record on the
    request how that went. A refusal that will not change (the run was terminated meanwhile)
    settles the request with the reason in apply_error: the decision stays recorded."""
    if _already_applied(approval):
        return _mark_applied(approval, now, "")
    try:
        with transaction.atomic(), transitions.within_caller_transaction():
            _apply(approval, now)
    except TransitionNotAllowed as exc:
        if _refusal_is_passing(approval):
            return _retry_later(approval, f"not applied yet: {exc}", now)
        logger.warning("approval request %s: not applied: %s", approval.pk, exc)
        if approval.kind == RequestKind.OPERATOR_ACTION:
            # Approved, yet the action is not taken (its requester lost the right to it, the
            # run moved on): the run's log says who approved and why nothing followed.
            record_lifecycle(approval, AuditAction.APPROVAL_DECIDED, now,
                             reason=approval.comment, actor=_decider(approval),
                             decision=approval.status, taken=False, not_applied=str(exc),
                             decision_id=str(approval.decision_id or ""))
        return _mark_applied(approval, now, f"not applied: {exc}")
    except Exception as exc:
        logger.exception("approval request %s: applying the decision failed", approval.pk)
        return _retry_later(approval, f"{type(exc).__name__}: {exc}", now)
    return _mark_applied(approval, now, "")


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
                             reason=approval.comment, actor=_decider(approval),
                             decision=approval.status, taken=False,
                             decision_id=str(approval.decision_id or ""))
            return
        # The same action, through the same table and transition, as the operator asked
        # for; the transition checks again that the approver is a second person.
        requester = requester_actor(approval)
        with transitions.applying_decision(str(approval.decision_id or "")):
            if approval.params.get("bulk_job"):
                # One request for the runs of a bulk job that needed a second person (each
                # run checked against the requester's permission there).
                apply_approved(approval.params["bulk_job"], actor=requester,
                               approved_by=_decider(approval))
                return
            refusal = requester_refusal(approval.requested_by, approval.action,
                                        approval.run_id)
            if refusal is not None:
                raise TransitionNotAllowed(refusal)
            ACTIONS[approval.action].perform(
                approval.run_id, actor=requester, approved_by=_decider(approval),
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
            call_id=approval.tool_call_id, actor=_decider(approval), comment=approval.comment,
            data={"approval_request": approval.pk, "payload_hash": approval.snapshot_hash,
                  "decision_id": str(approval.decision_id or "")}, now=now)
        return
    if approval.status == RequestStatus.EXPIRED:
        transitions.approval_timed_out(approval.run_id, step_name=approval.step_name,
                                       actor=SYSTEM, reason=approval.comment, now=now)
        return
    transitions.decide_approval(approval.run_id, step_name=approval.step_name,
                                approved=approval.status == RequestStatus.APPROVED,
                                actor=_decider(approval), comment=approval.comment,
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
    ApprovalRequest.objects.filter(pk=approval.pk, settled_at__isnull=True).update(
        settled_at=now, apply_error=error, apply_after=None)
    return True


def _retry_later(approval: ApprovalRequest, error: str, now: datetime) -> bool:
    attempts = approval.apply_attempts + 1
    delay = retry_delay(settings.APPROVALS_SETTLE_RETRY_SECONDS, attempts)
    ApprovalRequest.objects.filter(pk=approval.pk, settled_at__isnull=True).update(
        apply_attempts=attempts, apply_error=error,
        apply_after=now + timedelta(seconds=delay))
    return False
