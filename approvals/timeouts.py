"""A request nobody decided by its due time: what its timeout policy does to it, and what a
person who decides after that time is told.

One rule for both places that meet such a request, as for withdrawal (approvals.withdrawal):
the sweep, which times out what it finds due, and a person's decision that arrives after the
due time but before the sweep (the sweep runs every few seconds, and may be late or
stopped). Both apply the timeout through approvals.application.apply_timeout, in the
transaction that found the request due, and judge "due" by the same clock: the database's,
read as the run is locked (judged_at), as leases are, so that two machines whose clocks
disagree agree on it. Which of the two comes first changes nothing: the run goes the same
way, and the late person is refused with the same sentence.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings

from audit.actions import AuditAction
from runs import store
from runs.duration_text import duration_text

from .models import ApprovalRequest, NotificationKind, RequestStatus
from .notifications import grant_and_notify, request_problem, time_text
from .requests import LIFECYCLE_ACTOR, next_reminder, record_lifecycle

logger = logging.getLogger(__name__)

ESCALATED = "escalated"
TIMED_OUT = "timed_out"


def clock() -> datetime:
    """This process's estimate of the database's clock (runs.store), never its own: what
    links and pages are judged by, and bulk jobs' leases. A request is dated, and whether
    it is past its due time judged, by the database itself (judged_at)."""
    return store.current().now()


def judged_at(given: datetime | None, run) -> datetime:
    """The time a request's due time is judged by in the transaction that locked `run`
    (requests.lock_run), and what that transaction writes about its requests dated by
    (asked, due, reminded, escalated, decided, withdrawn, settled): the runtime's one rule,
    store.time_of_lock (the database's clock as the run was locked; a time the caller gave,
    a test's, stands in for it). Not clock(): that estimate runs ahead or behind for a
    while after this host's clock stepped, and would refuse a decision made in time, time a
    request out early, or open one due and reminded that much early or late."""
    return store.time_of_lock(run, given=given)


def is_due(approval: ApprovalRequest, now: datetime) -> bool:
    """Whether `approval` is pending and past its due time at `now` (the sweep's query asks
    the same of the rows: status pending, due_at <= now)."""
    return approval.is_pending and approval.due_at <= now


def time_out(approval: ApprovalRequest, now: datetime) -> str:
    """Apply the timeout policy to `approval`, pending, due and locked by the caller's
    transaction; the run is not touched here (approvals.application.apply_timeout applies it).

    escalate: the deputies (escalate_to) get the permission and a notification, a new due
    time is set and reminders start again; ESCALATED, the request still pending (escalation
    happens once: the next timeout ends it). reject: the request is rejected by the system.
    cancel (and an escalated request's second timeout): it expires, the run goes to
    attention. Both end it as the system's decision: TIMED_OUT."""
    # The time it was given (escalation included), not the time until this pass: the sweep
    # may be days late, and the run's record and a late person are told the same either way.
    waited = approval.due_at - approval.requested_at
    if approval.on_timeout == "escalate" and approval.escalation_level == 0 \
            and approval.escalate_to:
        approval.escalation_level = 1
        approval.due_at = now + approval.timeout
        approval.next_reminder_at = next_reminder(now, approval.remind_every, approval.due_at)
        problems = grant_and_notify(approval, approval.escalate_to,
                                    NotificationKind.ESCALATION, now)
        approval.problem = request_problem(approval, problems)
        approval.save(update_fields=["escalation_level", "due_at", "next_reminder_at",
                                     "problem"])
        record_lifecycle(approval, AuditAction.APPROVAL_ESCALATED, now,
                         escalated_to=list(approval.escalate_to),
                         due_at=approval.due_at.isoformat(), problem=approval.problem)
        logger.info("approval request %s escalated to %s", approval.pk,
                    ", ".join(approval.escalate_to))
        return ESCALATED
    if approval.on_timeout == "reject":
        approval.status = RequestStatus.REJECTED
        approval.comment = f"no decision within {duration_text(waited)}: rejected by the " \
                           "timeout policy"
    else:
        approval.status = RequestStatus.EXPIRED
        after = (f" and after escalation to {', '.join(approval.escalate_to)}"
                 if approval.escalation_level else "")
        approval.comment = f"no decision within {duration_text(waited)}{after}"
    approval.decided_by_label = LIFECYCLE_ACTOR.label
    approval.decided_at = now
    approval.apply_after = now + timedelta(seconds=settings.APPROVALS_SETTLE_RETRY_SECONDS)
    approval.next_reminder_at = None
    approval.save(update_fields=["status", "comment", "decided_by_label", "decided_at",
                                 "apply_after", "next_reminder_at"])
    logger.info("approval request %s timed out: %s", approval.pk, approval.comment)
    return TIMED_OUT


def timed_out(approval: ApprovalRequest) -> bool:
    """Whether `approval` was ended by its timeout (rejected or expired by the system, no
    person deciding)."""
    return (approval.status in (RequestStatus.REJECTED, RequestStatus.EXPIRED)
            and approval.decided_by_id is None
            and approval.decided_by_label == LIFECYCLE_ACTOR.label)


def late_decision_refusal(approval: ApprovalRequest) -> str:
    """What a person who decides a request its timeout ended is told: the same sentence
    whether the sweep or their own decision applied the timeout."""
    return (f"This request timed out at {time_text(approval.due_at)}; its timeout "
            f"({approval.on_timeout}) applies: {approval.comment}. Your decision was not "
            "recorded.")
