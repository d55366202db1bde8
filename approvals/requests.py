"""Opening approval requests: one for each approval step a run waits on, and a new one when
the payload of a pending request changed (the old one is superseded: it can never be
approved).

runs commits a run that reaches an approval step as: run `waiting`, step `waiting`, audit
record `approval_requested`; it knows nothing of this app. The sweeper (approvals.schedule)
notices such steps and opens a request for each here: the request, its approvers'
permissions and their notifications in one transaction.

Every function takes an optional `now` so tests drive the schedules with a controlled clock;
all state lives in the database, so a restart changes nothing.
"""

import logging
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone

from audit.actions import AuditAction
from audit.chain import Actor
from runs import definition as d
from runs import transitions
from runs.models import Run, RunStatus, Step, StepStatus

from .models import ApprovalRequest, NotificationKind, RequestKind, RequestStatus
from .notifications import grant_and_notify
from .snapshots import SnapshotUnavailable, compute_snapshot, registered_workflow

logger = logging.getLogger(__name__)

# Who records an approval request's lifecycle on the run's audit chain.
LIFECYCLE_ACTOR = Actor.system("approvals")


def record_lifecycle(approval: ApprovalRequest, action: str, now: datetime, *,
                     reason: str = "", **data) -> None:
    """In the caller's transaction: append what happened to `approval` (opened, reminded,
    escalated, superseded, withdrawn) to its run's hash-chained audit log, so the run's
    history holds its approvals' lifecycle, not only the request row."""
    transitions.record_approval_event(
        approval.run_id, action=action, step_name=approval.step_name, actor=LIFECYCLE_ACTOR,
        reason=reason, now=now,
        data={"approval_request": approval.pk, "kind": approval.kind,
              **({"operator_action": approval.action} if approval.action else {}), **data})


def next_reminder(start: datetime, every: timedelta | None, due: datetime) -> datetime | None:
    """When to remind next: `every` after `start`, if that comes before `due`."""
    if not every:
        return None
    at = start + every
    return at if at < due else None


def waiting_approval_steps(limit: int = 200):
    """Approval steps that runs is waiting on and that have no open request."""
    open_for_step = ApprovalRequest.objects.filter(
        run=OuterRef("run"), kind=RequestKind.STEP, step_name=OuterRef("name"),
        settled_at__isnull=True)
    return (Step.objects
            .filter(run__status=RunStatus.WAITING, name=F("run__current_step"),
                    kind=d.APPROVAL, status=StepStatus.WAITING)
            .filter(~Exists(open_for_step))
            .select_related("run").order_by("run_id")[:limit])


def open_pending_requests(*, now: datetime | None = None, limit: int = 200) -> int:
    """Open a request for every approval step a run waits on that has none. Returns how
    many were opened. A step whose request cannot be made (its snapshot fails, say) is
    logged and tried again at the next sweep; it never stops the others."""
    now = now or timezone.now()
    opened = 0
    for step in waiting_approval_steps(limit):
        try:
            if open_request(step.run, step.name, now=now) is not None:
                opened += 1
        except Exception:
            logger.exception("approval request for run %s step %s not opened; will retry",
                             step.run_id, step.name)
    return opened


def open_request(run: Run, step_name: str, *,
                 now: datetime | None = None) -> ApprovalRequest | None:
    """Open the request for `step_name` of `run`: the request, the approvers' permissions
    and the notifications in one transaction (a crash before commit leaves none of them).
    None if the step no longer waits or another process opened it first."""
    now = now or timezone.now()
    snapshot, digest = compute_snapshot(run, step_name)
    policy = registered_workflow(run).step(step_name).approval
    try:
        with transaction.atomic(durable=True):
            waiting = Step.objects.filter(run_id=run.pk, name=step_name,
                                          status=StepStatus.WAITING,
                                          run__status=RunStatus.WAITING).exists()
            if not waiting:
                return None
            return _step_request(run=run, step_name=step_name, snapshot=snapshot,
                                 digest=digest, policy=policy, now=now)
    except IntegrityError:
        # The one-open-request constraint: another sweep opened it first.
        logger.info("approval request for run %s step %s already open", run.pk, step_name)
        return None


def create_request(*, now: datetime, approvers: list[str], remind_every: timedelta | None,
                   timeout: timedelta, **fields) -> ApprovalRequest:
    """In the caller's transaction: a pending request asked at `now` and due `timeout`
    later, its `approvers` granted the decide permission and notified. `fields` are the
    rest of the request (its kind, run, subject, snapshot and timeout policy). What stood in
    the way of asking someone (an unknown group, say) is recorded on the request."""
    due = now + timeout
    approval = ApprovalRequest.objects.create(
        approvers=approvers, remind_every=remind_every, timeout=timeout, requested_at=now,
        due_at=due, next_reminder_at=next_reminder(now, remind_every, due), **fields)
    _record_problems(approval, grant_and_notify(approval, approvers,
                                                NotificationKind.REQUEST, now))
    record_lifecycle(approval, AuditAction.APPROVAL_OPENED, now, approvers=list(approvers),
                     due_at=due.isoformat(), payload_hash=approval.snapshot_hash,
                     problem=approval.problem)
    return approval


def _step_request(*, run: Run, step_name: str, snapshot: dict, digest: str,
                  policy: d.ApprovalPolicy, now: datetime) -> ApprovalRequest:
    return create_request(
        kind=RequestKind.STEP, run=run, step_name=step_name, snapshot=snapshot,
        snapshot_hash=digest, approvers=list(policy.approvers),
        escalate_to=list(policy.escalate_to), remind_every=policy.remind_every,
        timeout=policy.timeout, on_timeout=policy.on_timeout, now=now)


def _record_problems(approval: ApprovalRequest, problems: list[str]) -> None:
    if problems:
        approval.problem = "; ".join(problems)
        ApprovalRequest.objects.filter(pk=approval.pk).update(problem=approval.problem)
        logger.warning("approval request %s: %s", approval.pk, approval.problem)


def supersede(approval: ApprovalRequest, snapshot: dict, digest: str,
              now: datetime) -> ApprovalRequest:
    """In the caller's transaction, with `approval` locked: the payload changed, so this
    request can never be approved; a new one asks about the new payload."""
    approval.status = RequestStatus.SUPERSEDED
    approval.settled_at = now  # first: it frees the one-open-request constraint
    approval.comment = (f"payload changed while pending: sha256 {approval.snapshot_hash} "
                        f"became {digest}")
    approval.save(update_fields=["status", "settled_at", "comment"])
    record_lifecycle(approval, AuditAction.APPROVAL_SUPERSEDED, now, reason=approval.comment,
                     payload_hash=digest)
    policy = d.ApprovalPolicy(
        approvers=tuple(approval.approvers), remind_every=approval.remind_every,
        timeout=approval.timeout, on_timeout=approval.on_timeout,
        escalate_to=tuple(approval.escalate_to))
    new = _step_request(run=approval.run, step_name=approval.step_name, snapshot=snapshot,
                        digest=digest, policy=policy, now=now)
    approval.superseded_by = new
    approval.save(update_fields=["superseded_by"])
    logger.info("approval request %s superseded by %s: payload changed", approval.pk, new.pk)
    return new


def current_snapshot(approval: ApprovalRequest) -> tuple[dict, str] | SnapshotUnavailable:
    """The step's snapshot as it would be now (computed outside any transaction), or why
    it cannot be computed."""
    try:
        return compute_snapshot(approval.run, approval.step_name)
    except SnapshotUnavailable as exc:
        return exc
