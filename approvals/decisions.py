"""Decisions: a person's approve or reject, recorded on the request and applied to the run
in the same transaction.

The run is locked first, as every transition locks it, then the request; the decision is
recorded, applied (approvals.application, through runs' transitions within this
transaction), and the request marked settled, all in one commit. A crash anywhere in
between leaves neither. A refusal that will pass (the run is passing through queued or
running) or an error while it is applied (the database cancelled a statement) keeps the
decision recorded and unsettled, and the sweep applies it later; the person is told so.

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

from audit.chain import Actor
from audit.redaction import redact_text
from runs.execution.database_outage import would_not_wait
from runs.machine.storable import person_text_problem, text_problem

from .application import (
    APPLIED,
    NOT_APPLIED,
    PENDING,
    REFUSED,
    application_of,
    apply_decision,
    apply_timeout,
    pending_reason,
)
from .models import ApprovalRequest, RequestKind, RequestStatus
from .notifications import time_text
from .payload_check import SUPERSEDED, payload_outcome
from .permissions import can_view, decide_refusal, permissions_read_once
from .requests import lock_run
from .snapshots import SnapshotUnavailable, database_failure
from .timeouts import TIMED_OUT, is_due, judged_at, late_decision_refusal, timed_out
from .unreadable import HELD, payload_now, sealed_value_unreadable
from .withdrawal import is_still_awaited, withdraw

logger = logging.getLogger(__name__)

# The outcome of a decision refused because its decision id names another decision (the
# API answers it as a 409 with this error code, the console as an error).
DECISION_ID_REUSED = "decision_id_reused"


class DecisionRefused(ValueError):
    """A decision that cannot be recorded as given; nothing was recorded. `field` names
    what is missing or wrong (the comment)."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


class RequestUnseen(PermissionDenied):
    """Refused to a person who may not see the request (neither its approver nor the one
    who asked: permissions.can_view, the rule the console's pages answer by). The API
    answers it as a request that does not exist, in the same words, as those pages do:
    told apart, anyone could try ids to learn which requests exist. The message says why,
    for the command line's operator."""


def decision_refusal(*, approved: bool, comment: str) -> str | None:
    """Why a decision cannot be recorded as given, or None. A rejection says why: the
    requester and the run's audit trail are told nothing else. The console's form words
    its field error with this, and `decide` refuses by it for every other caller."""
    if comment and (problem := text_problem(comment)) is not None:
        # First, and here for every door (the console's form, the API's body and the
        # command line leave it to this rule): a NUL is told as such, with or without a
        # decision to go with it.
        return f"The comment is not text a record can keep ({problem})."
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

    @property
    def application(self) -> str | None:
        """Where a decision that stands (recorded, already recorded) is with the run:
        application.APPLIED, PENDING (the sweep applies it shortly) or NOT_APPLIED (the run
        cannot take it); None for any other outcome."""
        if self.outcome not in ("recorded", "already_recorded"):
            return None
        return application_of(self.request)


def decide(request_id: int, *, user, approved: bool, decision_id: uuid.UUID | str,
           comment: str = "", now: datetime | None = None) -> Decision:
    """Record `user`'s decision on request `request_id` and apply it to the run.

    Raises DecisionRefused for a decision that cannot be recorded as given (a rejection
    without a comment: decision_refusal), PermissionDenied (and logs it) if `user` may not
    decide (RequestUnseen if they may not see it either), and ApprovalRequest.DoesNotExist
    for an unknown id; nothing changes in any case.
    Otherwise nothing changes either unless the returned Decision is `recorded`:
    - the same decision_id again, with the same decision on the same request (double
      click, resent form): `already_recorded`; with another decision, or on another
      request: `decision_id_reused`, refused;
    - decided already by someone else (the first of two racing approvers wins):
      `already_decided`, saying by whom and when;
    - superseded, withdrawn or timed out: `closed`; one the run no longer waits for (its
      tool call cancelled, the run terminated) is withdrawn now and `closed`;
    - the payload differs from the one this request shows: the request is superseded, a
      new one is made and notified, and this decision is refused (`superseded`): an
      approval never applies to a payload it did not see (an operator action's: the
      high-impact effects it showed). Past its due time too, as the sweep's timeout would
      find it (payload_check.payload_outcome), and neither the timeout policy nor an
      escalation is applied to it;
    - past its due time, and the sweep has not timed it out yet: timed out now, as the
      sweep would (apply_timeout), and `closed` (an escalation leaves it open: the decision
      is then taken as after the sweep's escalation);
    - the payload cannot be computed now: `unavailable` (one that shows a value sealed
      with a key the ring no longer holds, a tool call's arguments too: the run is held for
      the key at once, the record naming `user`, and the request withdrawn, before any
      timeout is applied: unreadable.hold_for_the_key).
    A `recorded` decision says where it is with the run (Decision.application): applied;
    pending (the database interrupted its application, or the run is passing through
    another state: the sweep applies it shortly, and the message says so); or not applied
    (the run can no longer take it). A database error that leaves the transaction aborted
    (a statement cancelled before the savepoint's work, the savepoint or the rollback to
    it; the connection lost) is raised, and nothing was recorded. Nothing is read after the
    commit, so no failure there can make a recorded decision look undone.
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
    # the next reminder or the next decision, never applied as approved. (A tool call's
    # arguments are only opened, unreadable.payload_now; an operator action's effects are
    # read under the lock: payload_check.payload_outcome.)
    current = payload_now(approval) if approval.is_pending else None
    try:
        return _decide_locked(request_id, approval.run_id, user=user, approved=approved,
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


def _recorded(approval: ApprovalRequest) -> Decision:
    """The recorded decision, told from what its transaction wrote (on `approval`), not
    read again after the commit: a read that failed then (the session ended, a statement
    cancelled) would have told the person nothing was done of a decision that stands."""
    said = f"Your decision ({approval.status}) is recorded"
    state = application_of(approval)
    if state == APPLIED and approval.bulk_runs and approval.status == RequestStatus.APPROVED:
        return Decision("recorded", (
            f"{said}. Bulk job {approval.params['bulk_job']} is applying it: its worker "
            f"takes the action on each of the {len(approval.bulk_runs)} runs that waited for "
            "it; the job's page shows its progress."), approval)
    if state == APPLIED:
        return Decision("recorded", f"{said}.", approval)
    if state == NOT_APPLIED:
        why = approval.apply_error.removeprefix(REFUSED)
        return Decision("recorded", f"{said}, but the run cannot take it ({why}); nothing "
                        "more will be done with it.", approval)
    why, will_apply = pending_reason(approval)
    then = ("it will be applied automatically shortly" if will_apply
            else "it is tried again automatically")
    return Decision("recorded", f"{said}, but not applied to the run yet ({why}); {then}; "
                    "there is nothing more to do.", approval)


def _decide_locked(request_id: int, run_id: int, *, user, approved: bool,
                   decision_id: uuid.UUID, comment: str, current,
                   now: datetime | None) -> Decision:
    """decide's one transaction: the decision recorded and applied (or left for the sweep
    to apply), or what became of it instead (nothing recorded)."""
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
            # Sent again after a warning that it was not applied yet: still not, it says so.
            later = (" It is not applied to the run yet; the sweep applies it." if
                     application_of(approval) == PENDING else "")
            return Decision("already_recorded",
                            f"Your decision ({approval.status}) was already recorded at "
                            f"{time_text(approval.decided_at)}; nothing changed.{later}",
                            approval)
        if not approval.is_pending:
            return _closed(approval)
        if not is_still_awaited(approval):
            # The run stopped waiting for it (the call was cancelled, the run terminated)
            # and the sweep has not come by yet: withdrawn now, as the sweep would, and no
            # person is recorded as deciding what nobody can apply.
            withdraw(approval, now)
            return _closed(approval)
        outcome = payload_outcome(approval, current, now, by=Actor.for_user(user))
        # Before its timeout, as the sweep's timeout asks it, so that the request goes the
        # same way whichever comes first: changed, it is superseded, never decided by its
        # timeout policy on a payload nobody was shown; a key gone, nobody can decide it
        # until the key is back, neither this person nor the timeout policy.
        if outcome == SUPERSEDED:
            return _superseded(approval)
        if outcome is not None:
            return Decision("unavailable",
                            _unchecked(approval, current, held=outcome == HELD), approval)
        if is_due(approval, now) and apply_timeout(approval, now) == TIMED_OUT:
            # Past its due time and the sweep has not come by yet (it may be late or
            # stopped): nobody decided in time, whoever clicks now. Timed out here, as the
            # sweep would have, so the run goes the same way whichever comes first.
            return _closed(approval)
        if isinstance(current, SnapshotUnavailable):
            return Decision("unavailable", _unchecked(approval, current, held=False), approval)
        approval.status = RequestStatus.APPROVED if approved else RequestStatus.REJECTED
        approval.decided_by = user
        approval.decided_by_label = user.get_username()
        approval.decided_at = now
        approval.decision_id = decision_id
        approval.comment = comment
        approval.apply_after = now + timedelta(seconds=settings.APPROVALS_SETTLE_RETRY_SECONDS)
        approval.save(update_fields=["status", "decided_by", "decided_by_label", "decided_at",
                                     "decision_id", "comment", "apply_after"])
        apply_decision(approval, now)
    return _recorded(approval)


def _superseded(approval: ApprovalRequest) -> Decision:
    new = approval.superseded_by
    return Decision("superseded", f"The payload changed since this request was made, so it "
                    f"was replaced by request {new.pk}; nothing was approved or rejected. "
                    "Review the new request.", approval, new)


def _unchecked(approval: ApprovalRequest, problem: SnapshotUnavailable, *,
               held: bool) -> str:
    """Why the request's payload cannot be checked now, for the person deciding (`held`:
    its run was held for a key, unreadable.hold_for_the_key). A failure of the workflow's own
    snapshot function is theirs to hear; the database's own words (a statement cancelled, a
    lock timeout, a lost connection) are for operators, in the log, and the person is told
    what they mean."""
    failure = database_failure(problem)
    if (cause := sealed_value_unreadable(problem)) is not None:
        # The key ring's, not the workflow's: the key's name and the cure are for
        # operators (the log); the person deciding hears what it means for them.
        logger.warning("approval request %s: its payload could not be checked, nothing was "
                       "decided: %s", approval.pk, cause.message)
        said = ("What this request asks about cannot be checked now: a value it shows was "
                "sealed with a key this installation no longer holds")
        if held:
            return (f"{said}; nothing was decided or recorded. Its run is held until an "
                    "operator puts the key back (the log names it) and resumes it; this "
                    "request is withdrawn, and its approvers are asked again then.")
        return (f"{said}, which an operator must put back (the log names it); nothing was "
                "decided or recorded. Try again once it is back.")
    if failure is None:
        return (f"What this request asks about cannot be checked now ({problem}); nothing "
                "was decided. Try again later.")
    logger.warning("approval request %s: its payload could not be checked, nothing was "
                   "decided: %s", approval.pk, problem)
    why = ("the database would not wait for what checking it needed (a record held by "
           "another session, or the statement cancelled)" if would_not_wait(failure)
           else "the database could not be reached")
    return (f"What this request asks about cannot be checked now: {why}; nothing was "
            "decided or recorded. Try again in a little while.")


def deny_who_may_not_decide(user, approval: ApprovalRequest) -> None:
    """Raise PermissionDenied, saying why (decide_refusal), and log it, if `user` may not
    decide `approval`: decide's check, and the API's before it reads a body. RequestUnseen
    if they may not even see it (can_view, the console page's rule)."""
    with permissions_read_once(user):
        seen = can_view(user, approval)
        refusal = decide_refusal(user, approval)
    if not seen:
        logger.warning("approval request %s: %s (id %s) may neither see nor decide it; "
                       "refused", approval.pk, user.get_username(), user.pk)
        raise RequestUnseen(refusal)
    if refusal is not None:
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
