"""What happens to a request while nobody decides it: reminders, timeouts and escalation,
withdrawal once the run stops waiting for it, and the sweep that runs all of them.

The sweep (Celery beat, every few seconds, approvals.tasks) works row by row, each row in
its own transaction; nothing is kept in memory between passes. Every function takes an
optional `now` so tests drive the schedules with a controlled clock; all state lives in the
database, so a restart changes nothing.
"""

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Q

from audit.actions import AuditAction
from runs import store
from runs.machine.single_pass import single_pass

from . import sweep_scope
from .application import apply_pending_decisions, apply_timeout
from .models import (
    ApprovalRequest,
    Notification,
    NotificationKind,
    NotificationStatus,
    RequestStatus,
)
from .notifications import grant_and_notify, publish_notifications, request_problem
from .payload_check import SUPERSEDED, payload_outcome
from .requests import lock_run, next_reminder, record_lifecycle
from .timeouts import ESCALATED, TIMED_OUT, judged_at
from .unreadable import HELD, payload_now
from .withdrawal import is_still_awaited, no_longer_awaited, withdraw

logger = logging.getLogger(__name__)


def _lock_pending(pk: int, *conditions: Q, **filters) -> ApprovalRequest | None:
    """Request `pk`, locked, if it is still pending and matches; None if it is not, or if
    another sweep holds it."""
    return (ApprovalRequest.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("run")
            .filter(*conditions, pk=pk, status=RequestStatus.PENDING, **filters).first())


# --- reminders -----------------------------------------------------------------------------

# _remind's outcomes: reminded (or superseded, whose successor's mail is the reminder), or
# withdrawn, its run found no longer waiting for it or held for a key the ring no longer
# holds (as a timeout's are).
REMINDED = "reminded"
WITHDRAWN = "withdrawn"


@dataclass
class ReminderReport:
    reminded: int = 0
    # Found, with the run locked, no longer waited for, or their run held for a lost key:
    # withdrawn instead of reminded.
    withdrawn: int = 0


def send_reminders(*, now: datetime | None = None, limit: int = 200) -> int:
    """How many requests remind_due reminded."""
    return remind_due(now=now, limit=limit).reminded


def remind_due(*, now: datetime | None = None, limit: int = 200) -> ReminderReport:
    """Remind the current approvers of every pending request whose reminder is due. A
    request whose payload changed meanwhile (an operator action's: the high-impact effects
    it shows) is superseded instead (the new request's notification is the reminder); one
    whose payload shows a value sealed with a key the ring no longer holds is reminded to
    nobody: its run is held for the key and the request withdrawn
    (payload_check.payload_outcome, which the timeout and a decision ask too). Due, and
    dated, by the database's clock, in the query and as each run is locked
    (timeouts.judged_at), the clock the reminder was set by; `now`, a caller's time (a
    test's), stands in for it. One whose run no longer waits for it, found so with the run
    locked (it stopped waiting after the pass's withdrawal looked), is withdrawn instead,
    as its timeout and a decision withdraw it: counted as withdrawn, not as reminded."""
    report = ReminderReport()
    due = ApprovalRequest.objects.filter(status=RequestStatus.PENDING,
                                         next_reminder_at__lte=store.time_in_statement(now))
    for pk in list(due.order_by("next_reminder_at").values_list("pk", flat=True)[:limit]):
        try:
            outcome = _remind(pk, now)
        except Exception:
            logger.exception("approval request %s: reminder failed; will retry", pk)
            continue
        report.reminded += outcome == REMINDED
        report.withdrawn += outcome == WITHDRAWN
    return report


def _remind(pk: int, given: datetime | None) -> str | None:
    approval = ApprovalRequest.objects.select_related("run").get(pk=pk)
    current = payload_now(approval)
    with transaction.atomic(durable=True):
        # The run first, then the request, as a decision locks them: the other order
        # deadlocks with a person deciding at that moment.
        if (run := lock_run(approval.run_id, skip_held=True)) is None:
            return None  # held by another transaction: the next pass reminds
        now = judged_at(given, run)
        approval = _lock_pending(pk, next_reminder_at__lte=now)
        if approval is None:
            return None  # decided meanwhile, or another sweep has it
        if not is_still_awaited(approval):
            # Its run stopped waiting for it after the pass's withdrawal looked: withdrawn,
            # as its timeout and a decision would; nobody is reminded of a request that can
            # no longer be decided.
            withdraw(approval, now)
            return WITHDRAWN
        if (outcome := payload_outcome(approval, current, now)) is not None:
            # Changed, it was superseded: the new request's notification is the reminder.
            # A value it shows (a tool call's arguments too) sealed with a key the ring no
            # longer holds: nobody can decide it, so nobody is reminded of it; its run was
            # held for the key and the request withdrawn, as a person's decision or its
            # timeout would find it (a run only passing through queued or running is held
            # by the next pass).
            return {SUPERSEDED: REMINDED, HELD: WITHDRAWN}.get(outcome)
        # The grants are made again: a group created since the request was made (an
        # unknown group is recorded as a problem) now gets its permission and its email.
        problems = grant_and_notify(approval, approval.current_approvers,
                                    NotificationKind.REMINDER, now)
        approval.reminder_count += 1
        approval.next_reminder_at = next_reminder(now, approval.remind_every, approval.due_at)
        approval.problem = request_problem(approval, problems)
        approval.save(update_fields=["reminder_count", "next_reminder_at", "problem"])
        record_lifecycle(approval, AuditAction.APPROVAL_REMINDED, now,
                         reminder=approval.reminder_count, problem=approval.problem)
    return REMINDED


# --- timeouts and escalation ---------------------------------------------------------------

# _time_out's outcome for a request found due whose run no longer waits for it, or whose
# run it held for a key the ring no longer holds: WITHDRAWN, as a reminder's.


@dataclass
class TimeoutReport:
    escalated: int = 0
    timed_out: int = 0
    # Found due, but their run no longer waited for them, or was held for a key nobody can
    # decide them without: withdrawn instead.
    withdrawn: int = 0
    # Found due with a payload that changed since they were made: superseded instead.
    superseded: int = 0


def apply_timeouts(*, now: datetime | None = None, limit: int = 200) -> TimeoutReport:
    """Apply the timeout policy of every pending request past its due time
    (approvals.timeouts): escalate to the deputies once, or reject, or cancel (the run goes
    to attention, its step still waiting, for an operator to decide what happens). A
    request timed out is applied to its run in the same transaction, through the function a
    person's late decision uses (approvals.application.apply_timeout). Before that its
    payload is asked, as a reminder and a person's decision ask it
    (payload_check.payload_outcome): one that shows a value sealed with a key the ring no
    longer holds is neither escalated nor decided, its run held for the key and the request
    withdrawn; one that changed since the request was made (an operator action's effects
    too) is superseded by a request about the payload as it is now, with its own due time,
    never escalated to deputies or decided on what nobody was shown. Due is judged by the
    database's clock, in the query and again as each run is locked (timeouts.judged_at), as
    a decision judges it; `now`, a caller's time (a test's), stands in for it."""
    report = TimeoutReport()
    due = ApprovalRequest.objects.filter(status=RequestStatus.PENDING,
                                         due_at__lte=store.time_in_statement(now))
    for pk, run_id in list(due.order_by("due_at").values_list("pk", "run_id")[:limit]):
        try:
            outcome = _time_out(pk, run_id, now)
        except Exception:
            logger.exception("approval request %s: timeout failed; will retry", pk)
            continue
        if outcome == ESCALATED:
            report.escalated += 1
        elif outcome == TIMED_OUT:
            report.timed_out += 1
        elif outcome == WITHDRAWN:
            report.withdrawn += 1
        elif outcome == SUPERSEDED:
            report.superseded += 1
    return report


def _time_out(pk: int, run_id: int, given: datetime | None) -> str | None:
    # Read before the transaction, as a reminder and a decision read it: a step's snapshot
    # function reads the run's results, and should hold no lock while it does.
    current = payload_now(ApprovalRequest.objects.select_related("run").get(pk=pk))
    with transaction.atomic(durable=True):
        if (run := lock_run(run_id, skip_held=True)) is None:
            return None  # held by another transaction: the next pass applies it
        now = judged_at(given, run)
        approval = _lock_pending(pk, due_at__lte=now)
        if approval is None:
            return None  # decided meanwhile (or timed out by a late decision)
        if not is_still_awaited(approval):
            # Its run stopped waiting for it after the pass's withdrawal looked, or it came
            # due since: withdrawn, as a decision would; a timeout is never applied to a
            # request its run stopped waiting for.
            withdraw(approval, now)
            return WITHDRAWN
        if (outcome := payload_outcome(approval, current, now)) is not None:
            # Escalated, its deputies would be mailed a request none of them can decide (a
            # key gone) or a payload that is no longer the run's (changed); rejected or
            # expired, the system would decide what nobody could look at, or was shown. A
            # run only passing through queued or running is held by the next pass.
            return {HELD: WITHDRAWN, SUPERSEDED: SUPERSEDED}.get(outcome)
        return apply_timeout(approval, now)


# --- withdrawal ----------------------------------------------------------------------------

def withdraw_stale_requests(*, now: datetime | None = None, limit: int = 200,
                            due_only: bool = False) -> int:
    """Withdraw pending requests that can no longer be decided (approvals.withdrawal); with
    `due_only`, only among those whose timeout or reminder is due, or that have a
    notification due (along their partial indexes: what the pass is about to act on,
    approvals.sweep_scope). Due, and dated, by the database's clock, as timeouts and
    reminders are; `now` (a test's) stands in."""
    stale = ApprovalRequest.objects.filter(no_longer_awaited(), status=RequestStatus.PENDING)
    if due_only:
        due_by = store.time_in_statement(now)
        # A request whose mail is due is one the pass is about to act on too: withdrawn
        # first, its mail is skipped, where the full look would have withdrawn it only
        # after its approvers had been written to (a requester deactivated as it opened).
        # Their ids read first, along the outbox's own index: joined in, the plan read
        # every pending request.
        mailing = list(Notification.objects.filter(status=NotificationStatus.PENDING,
                                                   next_attempt_at__lte=due_by)
                       .values_list("request_id", flat=True).distinct()[:limit])
        stale = stale.filter(Q(due_at__lte=due_by) | Q(next_reminder_at__lte=due_by)
                             | Q(pk__in=mailing))
    count = 0
    for pk, run_id in list(stale.values_list("pk", "run_id")[:limit]):
        with transaction.atomic(durable=True):
            # The run first, then the request, as a decision locks them.
            if (run := lock_run(run_id, skip_held=True)) is None:
                continue  # held by another transaction: the next pass withdraws it
            at = judged_at(now, run)
            approval = _lock_pending(pk, no_longer_awaited())
            if approval is None:
                continue
            withdraw(approval, at)
            count += 1
    return count


# --- the sweep -----------------------------------------------------------------------------

JOB = "approvals.sweep"


@dataclass
class SweepReport:
    opened: int = 0
    # Waits this pass read that no request can ever be made for (approvals.sweep_scope).
    unaskable: int = 0
    # By the pass's withdrawal, and those its timeouts and reminders found to withdraw.
    withdrawn: int = 0
    escalated: int = 0
    timed_out: int = 0
    # Found due for their timeout with a changed payload: superseded, not timed out. (One a
    # reminder finds changed is counted as reminded: its successor's mail is the reminder.)
    superseded: int = 0
    reminded: int = 0
    settled: int = 0
    sent: int = 0
    retrying: int = 0
    failed: int = 0
    skipped: int = 0
    deferred: int = 0
    # Another pass held the job's lock: this one did nothing.
    locked_out: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


def sweep(*, now: datetime | None = None) -> SweepReport:
    """One pass of the approvals sweeper (Celery beat, every few seconds): open requests,
    withdraw stale ones, apply timeouts, send reminders, apply claimed decisions, deliver
    notifications. Each part works row by row in its own transactions; nothing is kept in
    memory between passes. Only one pass runs at a time (runs.machine.single_pass)."""
    with single_pass(JOB) as mine:
        if not mine:
            return SweepReport(locked_out=True)
        return _sweep(now)


def _sweep(given: datetime | None) -> SweepReport:
    report = SweepReport()
    # The pass has no time of its own: each part finds what is due, and dates what it
    # writes, by the database's clock in its statements or as it locks each run, as a
    # decision does (timeouts.judged_at); `given`, a caller's time (a test's), stands in for
    # it everywhere. This process's estimate of that clock is off for a while after the
    # host's clock stepped, and would ask, remind and time out early or late.
    # What the pass compares: the waits new since the last and the requests due, or once
    # in a while everything (approvals.sweep_scope).
    scope = sweep_scope.of_pass(given)
    asked = sweep_scope.open_unasked(scope, given)
    report.opened, report.unaskable = asked.opened, asked.unaskable
    # Withdrawal, timeouts, reminders and settling act only on open requests (pending, or
    # decided and not yet settled). When there is none, one look along the open-request
    # index replaces their four queries, whose building is most of an idle pass's time.
    if ApprovalRequest.objects.filter(settled_at__isnull=True).exists():
        report.withdrawn = withdraw_stale_requests(now=given, due_only=not scope.full)
        timeouts = apply_timeouts(now=given)
        report.escalated, report.timed_out = timeouts.escalated, timeouts.timed_out
        report.withdrawn += timeouts.withdrawn
        report.superseded = timeouts.superseded
        reminders = remind_due(now=given)
        report.reminded = reminders.reminded
        report.withdrawn += reminders.withdrawn
        report.settled = apply_pending_decisions(now=given)
    published = publish_notifications(now=given)
    report.sent, report.retrying = published.sent, published.retrying
    report.failed, report.skipped = published.failed, published.skipped
    report.deferred = published.deferred
    sweep_scope.end_pass(scope, asked.asked_through, given)
    return report
