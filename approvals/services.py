"""Approval writes: requests for waiting approval steps, decisions, reminders, timeouts and
escalation, four-eyes operator actions, and the notification outbox's publisher.

runs commits a run that reaches an approval step as: run `waiting`, step `waiting`, audit
record `approval_requested`; it knows nothing of this app. The sweeper here notices such
steps and opens a request for each, and a decision goes back to the run through runs'
transitions (decide_approval, approval_timed_out). Those transitions commit on their own
(durable), so every decision is made in two commits: first the decision is claimed on the
locked request (which also settles races and duplicates), then it is applied to the run.
A request whose decision is claimed but not applied stays open (settled_at is null) and the
sweeper applies it again later, so a crash between the two loses nothing.

Every function takes an optional `now` so tests drive the schedules with a controlled clock;
all state lives in the database, so a restart changes nothing.
"""

import logging
import uuid
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from email.utils import make_msgid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.db.models import Case, Exists, F, OuterRef, Q, TextField, Value, When
from django.db.models.functions import Concat
from django.urls import reverse
from django.utils import timezone
from guardian.shortcuts import assign_perm

from audit.chain import Actor
from audit.models import AuditRecord
from runs import definition as d
from runs import transitions
from runs.actions import ACTIONS
from runs.actions import Request as ActionRequest
from runs.errors import TransitionNotAllowed
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus
from runs.retry import RetryPolicy

from .email_headers import header_text
from .models import (
    DECIDE_CODENAME,
    DECIDED_STATUSES,
    ApprovalRequest,
    Notification,
    NotificationKind,
    NotificationStatus,
    RequestKind,
    RequestStatus,
)
from .permissions import can_decide
from .snapshots import (
    SnapshotUnavailable,
    compute_snapshot,
    normalise,
    snapshot_hash,
    snapshot_text,
)
from .tokens import approval_link_token

logger = logging.getLogger(__name__)

SYSTEM_LABEL = "approvals"
SYSTEM = Actor.system(SYSTEM_LABEL)

# Run states in which a pending request for one of its steps can no longer be decided:
# the sweeper withdraws it. (Queued and running are passing states: an operator's resume
# of a waiting run goes through them back to waiting.)
_NOT_WAITING = [RunStatus.ATTENTION, RunStatus.COMPENSATING, RunStatus.COMPENSATION_FAILED,
                RunStatus.COMPLETED, RunStatus.COMPENSATED, RunStatus.TERMINATED]
_FINAL = [RunStatus.COMPLETED, RunStatus.COMPENSATED, RunStatus.TERMINATED]


def _now(now: datetime | None) -> datetime:
    return now or timezone.now()


def _when(moment: datetime | None) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else "?"


# --- approvers and notifications -----------------------------------------------------------

@dataclass
class _Recipient:
    user: object
    email: str


def _resolve(names: list[str]) -> tuple[list, list[Group], list[str]]:
    """("user:ann", "group:finance") -> users, groups and what could not be resolved."""
    User = get_user_model()
    users, groups, problems = [], [], []
    for name in names:
        kind, _, value = name.partition(":")
        if kind == "user":
            user = User.objects.filter(**{User.USERNAME_FIELD: value}).first()
            if user is None:
                problems.append(f"unknown user {value!r}")
            elif not user.is_active:
                problems.append(f"user {value!r} is inactive")
            else:
                users.append(user)
        elif kind == "group":
            group = Group.objects.filter(name=value).first()
            if group is None:
                problems.append(f"unknown group {value!r}")
            else:
                groups.append(group)
        else:
            problems.append(f"{name!r} is neither 'user:...' nor 'group:...'")
    return users, groups, problems


def _grant_and_notify(request: ApprovalRequest, names: list[str], kind: str,
                      now: datetime) -> list[str]:
    """Grant the decide permission on `request` to `names` and queue one notification per
    person with an email address, in the caller's transaction. Returns the problems found
    (unknown users or groups, people without an address): recorded, never raised."""
    users, groups, problems = _resolve(names)
    for user in users:
        assign_perm(DECIDE_CODENAME, user, request)
    for group in groups:
        assign_perm(DECIDE_CODENAME, group, request)
    recipients: dict[int, _Recipient] = {}
    seen = {request.requested_by_id}  # four eyes: whoever asked is not asked to decide
    members = get_user_model().objects.filter(groups__in=groups, is_active=True).distinct()
    for user in [*users, *members]:
        if user.pk in seen:
            continue
        seen.add(user.pk)
        if not user.email:
            problems.append(f"{user.get_username()} has no email address")
            continue
        recipients[user.pk] = _Recipient(user, user.email)
    if not recipients and not problems:
        problems.append(f"nobody to notify among {', '.join(names)}")
    _queue_notifications(request, list(recipients.values()), kind, now)
    return problems


def _queue_notifications(request: ApprovalRequest, recipients: list[_Recipient], kind: str,
                         now: datetime) -> list[Notification]:
    subject, body = _message(request, kind)
    domain = settings.DEFAULT_FROM_EMAIL.rpartition("@")[2] or "localhost"
    return Notification.objects.bulk_create([
        Notification(request=request, kind=kind, user=r.user, recipient=r.email,
                     subject=subject, body=body, next_attempt_at=now, created_at=now,
                     message_id=make_msgid(idstring=f"approval-{request.pk}", domain=domain))
        for r in recipients
    ])


SUBJECT_MAX = Notification._meta.get_field("subject").max_length


def _message(request: ApprovalRequest, kind: str) -> tuple[str, str]:
    run = request.run
    # Names and the business key come from callers and other systems: only their
    # header-safe form goes into the subject (and the same one-line form into the body).
    workflow, key = header_text(run.workflow_name), header_text(run.business_key)
    what = (f"{workflow} {key}: {header_text(request.step_name)}"
            if request.kind == RequestKind.STEP else
            f"{header_text(request.action)} of run {run.pk} ({workflow} {key})")
    prefix = {NotificationKind.REMINDER: "Reminder: ",
              NotificationKind.ESCALATION: "Escalated: "}.get(kind, "")
    subject = header_text(f"{prefix}approval needed: {what}", limit=SUBJECT_MAX)
    lines = [f"Your decision is needed: {what}."]
    if kind == NotificationKind.ESCALATION:
        lines.append(f"Nobody decided in time, so it now comes to you as well "
                     f"(escalation {request.escalation_level}).")
    if request.kind == RequestKind.OPERATOR_ACTION:
        lines.append("An operator asked for this action; it needs a second person's approval.")
    lines += [f"Requested {_when(request.requested_at)}, due {_when(request.due_at)}.", "",
              "What you are asked to approve:", snapshot_text(request.snapshot), "",
              f"Payload sha256: {request.snapshot_hash}"]
    return subject, "\n".join(lines)


# --- opening requests ----------------------------------------------------------------------

def _next_reminder(start: datetime, every: timedelta | None, due: datetime) -> datetime | None:
    if not every:
        return None
    at = start + every
    return at if at < due else None


def waiting_approval_steps(limit: int = 200):
    """Approval steps that runs is waiting on and that have no open request."""
    open_request = ApprovalRequest.objects.filter(
        run=OuterRef("run"), kind=RequestKind.STEP, step_name=OuterRef("name"),
        settled_at__isnull=True)
    return (Step.objects
            .filter(run__status=RunStatus.WAITING, name=F("run__current_step"),
                    kind=d.APPROVAL, status=StepStatus.WAITING)
            .filter(~Exists(open_request))
            .select_related("run").order_by("run_id")[:limit])


def open_pending_requests(*, now: datetime | None = None, limit: int = 200) -> int:
    """Open a request for every approval step a run waits on that has none. Returns how
    many were opened. A step whose request cannot be made (its snapshot fails, say) is
    logged and tried again at the next sweep; it never stops the others."""
    now = _now(now)
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
    now = _now(now)
    snapshot, digest = compute_snapshot(run, step_name)
    policy = _policy(run, step_name)
    try:
        with transaction.atomic(durable=True):
            waiting = Step.objects.filter(run_id=run.pk, name=step_name,
                                          status=StepStatus.WAITING,
                                          run__status=RunStatus.WAITING).exists()
            if not waiting:
                return None
            return _create_request(run=run, step_name=step_name, snapshot=snapshot,
                                   digest=digest, policy=policy, now=now)
    except IntegrityError:
        # The one-open-request constraint: another sweep opened it first.
        logger.info("approval request for run %s step %s already open", run.pk, step_name)
        return None


def _policy(run: Run, step_name: str) -> d.ApprovalPolicy:
    workflow = d.registry.get(run.workflow_name, run.workflow_version)
    if workflow is None:
        raise SnapshotUnavailable(f"{run.workflow_name} v{run.workflow_version} is not "
                                  "registered in this process")
    return workflow.step(step_name).approval


def _create_request(*, run: Run, step_name: str, snapshot: dict, digest: str,
                    policy: d.ApprovalPolicy, now: datetime) -> ApprovalRequest:
    due = now + policy.timeout
    request = ApprovalRequest.objects.create(
        kind=RequestKind.STEP, run=run, step_name=step_name, snapshot=snapshot,
        snapshot_hash=digest, approvers=list(policy.approvers),
        escalate_to=list(policy.escalate_to), remind_every=policy.remind_every,
        timeout=policy.timeout, on_timeout=policy.on_timeout, requested_at=now, due_at=due,
        next_reminder_at=_next_reminder(now, policy.remind_every, due),
    )
    _record_problems(request, _grant_and_notify(request, request.approvers,
                                                NotificationKind.REQUEST, now))
    return request


def _record_problems(request: ApprovalRequest, problems: list[str]) -> None:
    if problems:
        request.problem = "; ".join(problems)
        ApprovalRequest.objects.filter(pk=request.pk).update(problem=request.problem)
        logger.warning("approval request %s: %s", request.pk, request.problem)


def _supersede(request: ApprovalRequest, snapshot: dict, digest: str,
               now: datetime) -> ApprovalRequest:
    """In the caller's transaction, with `request` locked: the payload changed, so this
    request can never be approved; a new one asks about the new payload."""
    request.status = RequestStatus.SUPERSEDED
    request.settled_at = now  # first: it frees the one-open-request constraint
    request.comment = (f"payload changed while pending: sha256 {request.snapshot_hash} "
                       f"became {digest}")
    request.save(update_fields=["status", "settled_at", "comment"])
    policy = d.ApprovalPolicy(
        approvers=tuple(request.approvers), remind_every=request.remind_every,
        timeout=request.timeout, on_timeout=request.on_timeout,
        escalate_to=tuple(request.escalate_to))
    new = _create_request(run=request.run, step_name=request.step_name, snapshot=snapshot,
                          digest=digest, policy=policy, now=now)
    request.superseded_by = new
    request.save(update_fields=["superseded_by"])
    logger.info("approval request %s superseded by %s: payload changed", request.pk, new.pk)
    return new


def _current_snapshot(request: ApprovalRequest) -> tuple[dict, str] | SnapshotUnavailable:
    """The step's snapshot as it would be now (computed outside any transaction), or why
    it cannot be computed."""
    try:
        return compute_snapshot(request.run, request.step_name)
    except SnapshotUnavailable as exc:
        return exc


# --- decisions -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Decision:
    """What became of a person's decision, with a sentence to show them."""

    outcome: str  # recorded, already_recorded, already_decided, closed, superseded, unavailable
    message: str
    request: ApprovalRequest
    new_request: ApprovalRequest | None = None

    @property
    def recorded(self) -> bool:
        return self.outcome == "recorded"


def decide(request_id: int, *, user, approved: bool, decision_id: uuid.UUID | str,
           comment: str = "", now: datetime | None = None) -> Decision:
    """Record `user`'s decision on request `request_id` and apply it to the run.

    Raises PermissionDenied (and logs it) if `user` may not decide, and
    ApprovalRequest.DoesNotExist for an unknown id; nothing changes in either case.
    Otherwise nothing changes either unless the returned Decision is `recorded`:
    - the same decision_id again (double click, resent form): `already_recorded`;
    - decided already by someone else (the first of two racing approvers wins):
      `already_decided`, saying by whom and when;
    - superseded, withdrawn or timed out: `closed`;
    - the payload differs from the one this request shows: the request is superseded, a
      new one is made and notified, and this decision is refused (`superseded`): an
      approval never applies to a payload it did not see;
    - the payload cannot be computed now: `unavailable`.
    """
    now = _now(now)
    decision_id = uuid.UUID(str(decision_id))
    comment = (comment or "").strip()
    request = ApprovalRequest.objects.select_related("run").get(pk=request_id)
    # Recomputed before the transaction: it reads the run's results and calls the step's
    # snapshot function, neither of which should hold the request's lock. The comparison
    # happens under the lock below; a change in between is caught by the next reminder or
    # the next decision, never applied as approved.
    current = (_current_snapshot(request)
               if request.kind == RequestKind.STEP and request.is_pending else None)
    with transaction.atomic(durable=True):
        request = ApprovalRequest.objects.select_for_update(of=("self",)).select_related(
            "run").get(pk=request_id)
        if not can_decide(user, request):
            logger.warning("approval request %s: %s (id %s) may not decide it; refused",
                           request.pk, user.get_username(), user.pk)
            raise PermissionDenied(f"you may not decide approval request {request.pk}")
        if request.decision_id == decision_id:
            return Decision("already_recorded",
                            f"Your decision ({request.status}) was already recorded at "
                            f"{_when(request.decided_at)}; nothing changed.", request)
        if ApprovalRequest.objects.filter(decision_id=decision_id).exists():
            return Decision("already_recorded", "This form was already used for another "
                            "decision; nothing changed.", request)
        if not request.is_pending:
            return _closed(request)
        if isinstance(current, SnapshotUnavailable):
            return Decision("unavailable", f"What this request asks about cannot be checked "
                            f"now ({current}); nothing was decided. Try again later.", request)
        if current is not None and current[1] != request.snapshot_hash:
            new = _supersede(request, *current, now)
            return Decision(
                "superseded",
                f"The payload changed since this request was made, so it was replaced by "
                f"request {new.pk}; nothing was approved or rejected. Review the new "
                "request.", request, new)
        request.status = RequestStatus.APPROVED if approved else RequestStatus.REJECTED
        request.decided_by = user
        request.decided_by_label = user.get_username()
        request.decided_at = now
        request.decision_id = decision_id
        request.comment = comment
        request.apply_after = now + timedelta(seconds=settings.APPROVALS_SETTLE_RETRY_SECONDS)
        request.save(update_fields=["status", "decided_by", "decided_by_label", "decided_at",
                                    "decision_id", "comment", "apply_after"])
    settle(request.pk, now=now)
    request.refresh_from_db()
    message = f"Your decision ({request.status}) is recorded."
    if request.apply_error:
        message += f" It could not be applied to the run: {request.apply_error}"
    return Decision("recorded", message, request)


def _closed(request: ApprovalRequest) -> Decision:
    if request.status in (RequestStatus.APPROVED, RequestStatus.REJECTED) \
            and request.decided_by_id is not None:
        return Decision("already_decided",
                        f"Already {request.status} by {request.decided_by_label} at "
                        f"{_when(request.decided_at)}; your decision was not recorded.",
                        request)
    if request.status == RequestStatus.SUPERSEDED:
        return Decision("closed", f"This request was replaced by request "
                        f"{request.superseded_by_id} because its payload changed; nothing "
                        "was decided.", request, request.superseded_by)
    return Decision("closed", f"This request is {request.status} "
                    f"({request.comment or 'no longer waiting for a decision'}); nothing "
                    "was decided.", request)


def _decider(request: ApprovalRequest) -> Actor:
    if request.decided_by_id is not None:
        return Actor(kind=AuditRecord.ActorKind.USER, label=request.decided_by_label,
                     user_id=request.decided_by_id)
    return Actor.system(request.decided_by_label or SYSTEM_LABEL)


def settle(request_id: int, *, now: datetime | None = None) -> bool:
    """Apply a claimed decision to the run (or run the approved operator action) and mark
    the request settled. True once settled. A refusal that will not change (the run was
    terminated meanwhile) settles the request with the reason in apply_error: the decision
    stays recorded. Anything else leaves it open for the sweeper to try again."""
    now = _now(now)
    request = ApprovalRequest.objects.select_related("run").get(pk=request_id)
    if request.settled_at is not None or request.status not in DECIDED_STATUSES:
        return request.settled_at is not None
    try:
        _apply(request, now)
    except TransitionNotAllowed as exc:
        if _refusal_is_passing(request):
            return _retry_later(request, f"not applied yet: {exc}", now)
        error = "" if _already_applied(request) else f"not applied: {exc}"
        if error:
            logger.warning("approval request %s: %s", request.pk, error)
        return _mark_settled(request, now, error)
    except Exception as exc:
        logger.exception("approval request %s: applying the decision failed", request.pk)
        return _retry_later(request, f"{type(exc).__name__}: {exc}", now)
    return _mark_settled(request, now, "")


def _apply(request: ApprovalRequest, now: datetime) -> None:
    if request.kind == RequestKind.OPERATOR_ACTION:
        if request.status != RequestStatus.APPROVED:
            return  # rejected or expired: the action is simply not taken
        # The same action, through the same table and transition, as the operator asked
        # for; the transition checks again that the approver is a second person.
        requester = Actor(kind=AuditRecord.ActorKind.USER,
                          label=request.snapshot.get("requested_by", ""),
                          user_id=request.requested_by_id)
        ACTIONS[request.action].perform(
            request.run_id, actor=requester, approved_by=_decider(request),
            request=ActionRequest(reason=request.snapshot.get("reason", ""),
                                  step=dict(request.params).get("step", "")))
        return
    if request.status == RequestStatus.EXPIRED:
        transitions.approval_timed_out(request.run_id, step_name=request.step_name,
                                       actor=SYSTEM, reason=request.comment, now=now)
        return
    transitions.decide_approval(request.run_id, step_name=request.step_name,
                                approved=request.status == RequestStatus.APPROVED,
                                actor=_decider(request), comment=request.comment,
                                data={"approval_request": request.pk,
                                      "payload_hash": request.snapshot_hash,
                                      "decision_id": str(request.decision_id or "")},
                                now=now)


def _refusal_is_passing(request: ApprovalRequest) -> bool:
    """A run passing through queued or running (an operator resumed it) comes back to
    waiting on the same step: the decision is applied then."""
    if request.kind != RequestKind.STEP:
        return False
    run = Run.objects.get(pk=request.run_id)
    step = Step.objects.filter(run=run, name=request.step_name).first()
    return (step is not None and step.status == StepStatus.WAITING
            and run.status in (RunStatus.QUEUED, RunStatus.RUNNING))


def _already_applied(request: ApprovalRequest) -> bool:
    """Whether the run already shows this decision (applied by an earlier attempt that
    died before recording it)."""
    if request.kind != RequestKind.STEP:
        return False
    step = Step.objects.select_related("run").filter(run_id=request.run_id,
                                                     name=request.step_name).first()
    if step is None:
        return False
    if request.status == RequestStatus.EXPIRED:
        return (step.status == StepStatus.WAITING and step.run.status == RunStatus.ATTENTION
                and step.run.attention_reason == AttentionReason.APPROVAL_TIMED_OUT)
    expected = StepStatus.SUCCEEDED if request.status == RequestStatus.APPROVED \
        else StepStatus.FAILED
    result = step.result if isinstance(step.result, dict) else {}
    return (step.status == expected and result.get("by") == _decider(request).label
            and request.comment == result.get("comment"))


def _mark_settled(request: ApprovalRequest, now: datetime, error: str) -> bool:
    ApprovalRequest.objects.filter(pk=request.pk, settled_at__isnull=True).update(
        settled_at=now, apply_error=error, apply_after=None)
    return True


NOTIFICATION_RETRY_SECONDS = 30


def _backoff(initial: float) -> RetryPolicy:
    # The runtime's retry policy, used for its backoff arithmetic: doubling, capped at an hour.
    return RetryPolicy(initial_interval=initial, backoff_coefficient=2,
                       maximum_interval=max(initial, 3600), jitter=0)


def _retry_later(request: ApprovalRequest, error: str, now: datetime) -> bool:
    attempts = request.apply_attempts + 1
    delay = _backoff(settings.APPROVALS_SETTLE_RETRY_SECONDS).base_delay(attempts)
    ApprovalRequest.objects.filter(pk=request.pk, settled_at__isnull=True).update(
        apply_attempts=attempts, apply_error=error,
        apply_after=now + timedelta(seconds=delay))
    return False


# --- the schedules: reminders, timeouts, escalation ----------------------------------------

def send_reminders(*, now: datetime | None = None, limit: int = 200) -> int:
    """Remind the current approvers of every pending request whose reminder is due. A
    request whose payload changed meanwhile is superseded instead (the new request's
    notification is the reminder)."""
    now = _now(now)
    count = 0
    due = ApprovalRequest.objects.filter(status=RequestStatus.PENDING,
                                         next_reminder_at__lte=now)
    for pk in list(due.order_by("next_reminder_at").values_list("pk", flat=True)[:limit]):
        try:
            count += _remind(pk, now)
        except Exception:
            logger.exception("approval request %s: reminder failed; will retry", pk)
    return count


def _remind(pk: int, now: datetime) -> int:
    request = ApprovalRequest.objects.select_related("run").get(pk=pk)
    current = _current_snapshot(request) if request.kind == RequestKind.STEP else None
    with transaction.atomic(durable=True):
        request = (ApprovalRequest.objects.select_for_update(skip_locked=True, of=("self",))
                   .select_related("run")
                   .filter(pk=pk, status=RequestStatus.PENDING, next_reminder_at__lte=now)
                   .first())
        if request is None:
            return 0  # decided meanwhile, or another sweep has it
        if isinstance(current, tuple) and current[1] != request.snapshot_hash:
            _supersede(request, *current, now)
            return 1
        # The grants are made again: a group created since the request was made (an
        # unknown group is recorded as a problem) now gets its permission and its email.
        problems = _grant_and_notify(request, request.current_approvers,
                                     NotificationKind.REMINDER, now)
        request.reminder_count += 1
        request.next_reminder_at = _next_reminder(now, request.remind_every, request.due_at)
        request.problem = "; ".join(problems)
        request.save(update_fields=["reminder_count", "next_reminder_at", "problem"])
    return 1


@dataclass
class TimeoutReport:
    escalated: int = 0
    timed_out: int = 0


def apply_timeouts(*, now: datetime | None = None, limit: int = 200) -> TimeoutReport:
    """Apply the timeout policy of every pending request past its due time.

    escalate: the deputies (escalate_to) get the permission and a notification, a new due
    time is set and reminders start again; at the next timeout the run goes to attention
    (escalation happens once). reject: the request is rejected by the system and the run
    stops in attention as after any rejection. cancel: the run goes to attention, its step
    still waiting, for an operator to decide what happens.
    """
    now = _now(now)
    report = TimeoutReport()
    due = ApprovalRequest.objects.filter(status=RequestStatus.PENDING, due_at__lte=now)
    for pk in list(due.order_by("due_at").values_list("pk", flat=True)[:limit]):
        try:
            outcome = _time_out(pk, now)
        except Exception:
            logger.exception("approval request %s: timeout failed; will retry", pk)
            continue
        if outcome == "escalated":
            report.escalated += 1
        elif outcome == "timed_out":
            report.timed_out += 1
            settle(pk, now=now)
    return report


def _time_out(pk: int, now: datetime) -> str | None:
    with transaction.atomic(durable=True):
        request = (ApprovalRequest.objects.select_for_update(skip_locked=True, of=("self",))
                   .select_related("run")
                   .filter(pk=pk, status=RequestStatus.PENDING, due_at__lte=now).first())
        if request is None:
            return None
        waited = now - request.requested_at
        if request.on_timeout == "escalate" and request.escalation_level == 0 \
                and request.escalate_to:
            request.escalation_level = 1
            request.due_at = now + request.timeout
            request.next_reminder_at = _next_reminder(now, request.remind_every,
                                                      request.due_at)
            problems = _grant_and_notify(request, request.escalate_to,
                                         NotificationKind.ESCALATION, now)
            request.problem = "; ".join(problems)
            request.save(update_fields=["escalation_level", "due_at", "next_reminder_at",
                                        "problem"])
            logger.info("approval request %s escalated to %s", pk,
                        ", ".join(request.escalate_to))
            return "escalated"
        if request.on_timeout == "reject":
            request.status = RequestStatus.REJECTED
            request.comment = f"no decision within {_duration(waited)}: rejected by the " \
                              "timeout policy"
        else:
            request.status = RequestStatus.EXPIRED
            after = (f" and after escalation to {', '.join(request.escalate_to)}"
                     if request.escalation_level else "")
            request.comment = f"no decision within {_duration(waited)}{after}"
        request.decided_by_label = SYSTEM_LABEL
        request.decided_at = now
        request.apply_after = now + timedelta(seconds=settings.APPROVALS_SETTLE_RETRY_SECONDS)
        request.next_reminder_at = None
        request.save(update_fields=["status", "comment", "decided_by_label", "decided_at",
                                    "apply_after", "next_reminder_at"])
        logger.info("approval request %s timed out: %s", pk, request.comment)
    return "timed_out"


def _duration(delta: timedelta) -> str:
    hours = delta.total_seconds() / 3600
    return f"{hours / 24:.1f} days" if hours >= 48 else f"{hours:.1f} hours"


def withdraw_stale_requests(*, now: datetime | None = None, limit: int = 200) -> int:
    """Withdraw pending requests that can no longer be decided: their run stopped waiting
    on the step (terminated, compensated, decided or settled by an operator), or, for an
    operator action, the run is final."""
    now = _now(now)
    step_waiting = Step.objects.filter(run=OuterRef("run"), name=OuterRef("step_name"),
                                       status=StepStatus.WAITING)
    stale_q = ((Q(kind=RequestKind.STEP) & (~Exists(step_waiting)
                                            | Q(run__status__in=_NOT_WAITING)))
               | Q(kind=RequestKind.OPERATOR_ACTION, run__status__in=_FINAL))
    stale = ApprovalRequest.objects.filter(status=RequestStatus.PENDING)
    count = 0
    for pk in list(stale.filter(stale_q).values_list("pk", flat=True)[:limit]):
        with transaction.atomic(durable=True):
            request = (ApprovalRequest.objects.select_for_update(skip_locked=True, of=("self",))
                       .select_related("run")
                       .filter(stale_q, pk=pk, status=RequestStatus.PENDING).first())
            if request is None:
                continue
            step = Step.objects.filter(run_id=request.run_id, name=request.step_name).first()
            request.status = RequestStatus.WITHDRAWN
            request.settled_at = now
            request.next_reminder_at = None
            request.comment = (f"the run no longer waits for this decision (run "
                               f"{request.run.status}"
                               + (f", step {step.status})" if step else ")"))
            request.save(update_fields=["status", "settled_at", "next_reminder_at", "comment"])
            logger.info("approval request %s withdrawn: %s", pk, request.comment)
            count += 1
    return count


def settle_decisions(*, now: datetime | None = None, limit: int = 200) -> int:
    """Apply decisions that were claimed but not applied (the process died in between, or
    the run was passing through another state). Returns how many settled."""
    now = _now(now)
    due = ApprovalRequest.objects.filter(settled_at__isnull=True, status__in=DECIDED_STATUSES,
                                         apply_after__lte=now)
    return sum(settle(pk, now=now) for pk in
               list(due.order_by("apply_after").values_list("pk", flat=True)[:limit]))


# --- the outbox publisher ------------------------------------------------------------------

@dataclass
class PublishReport:
    sent: int = 0
    retrying: int = 0
    failed: int = 0
    skipped: int = 0


def request_link(request: ApprovalRequest, *, now: datetime | None = None) -> str:
    """The absolute, signed link to `request` in its current state."""
    token = approval_link_token.make_token(request, now=now)
    path = reverse("approvals:link", kwargs={"pk": request.pk, "token": token})
    return settings.APPROVALS_BASE_URL.rstrip("/") + path


def publish_notifications(*, now: datetime | None = None, limit: int = 100) -> PublishReport:
    """Send the notifications that are due, through Django's email backend.

    Each is sent holding its row's lock, so two publishers never send the same one; a
    failure schedules another attempt with exponential backoff, and after
    APPROVALS_NOTIFICATION_MAX_ATTEMPTS the notification is marked failed. A notification
    whose request no longer waits for anyone is skipped: nobody is asked about something
    already decided.
    """
    now = _now(now)
    report = PublishReport()
    due = Notification.objects.filter(status=NotificationStatus.PENDING,
                                      next_attempt_at__lte=now)
    for pk in list(due.order_by("next_attempt_at", "pk").values_list("pk", flat=True)[:limit]):
        outcome = _deliver(pk, now)
        if outcome is not None:
            setattr(report, outcome, getattr(report, outcome) + 1)
    return report


def _deliver(pk: int, now: datetime) -> str | None:
    with transaction.atomic(durable=True):
        note = (Notification.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("request", "request__run")
                .filter(pk=pk, status=NotificationStatus.PENDING, next_attempt_at__lte=now)
                .first())
        if note is None:
            return None
        request = note.request
        if not request.is_pending:
            note.status = NotificationStatus.SKIPPED
            note.last_error = f"request {request.status} before delivery"
            note.save(update_fields=["status", "last_error"])
            return "skipped"
        note.attempts += 1
        try:
            email = _email(note, request, now)
        except Exception as exc:
            # A message that cannot be built (a recipient address with a line break, say)
            # will not build on the next attempt either: it fails now, with its reason.
            outcome = _give_up(note, request, f"cannot be built: {type(exc).__name__}: {exc}")
        else:
            try:
                email.send(fail_silently=False)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
                if note.attempts >= settings.APPROVALS_NOTIFICATION_MAX_ATTEMPTS:
                    outcome = _give_up(note, request,
                                       f"not sent after {note.attempts} attempts: {error}")
                else:
                    note.last_error = error[:2000]
                    delay = _backoff(NOTIFICATION_RETRY_SECONDS).base_delay(note.attempts)
                    note.next_attempt_at = now + timedelta(seconds=delay)
                    outcome = "retrying"
                    logger.warning("notification %s to %s: attempt %s failed: %s", note.pk,
                                   note.recipient, note.attempts, note.last_error)
            else:
                note.status = NotificationStatus.SENT
                note.sent_at = now
                note.provider_message_id = note.message_id
                note.last_error = ""
                outcome = "sent"
        note.save(update_fields=["status", "attempts", "next_attempt_at", "last_error",
                                 "sent_at", "provider_message_id"])
    return outcome


def _email(note: Notification, request: ApprovalRequest, now: datetime) -> EmailMessage:
    """The notification as an email, its headers checked: raises if it cannot be built."""
    days = settings.APPROVAL_LINK_MAX_AGE / 86400
    body = (f"{note.body}\n\nOpen the request (sign in first; the link works for "
            f"{days:g} days and only while the request is pending):\n"
            f"{request_link(request, now=now)}\n")
    # The subject again through header_text: rows queued before subjects were sanitised.
    email = EmailMessage(subject=header_text(note.subject, limit=SUBJECT_MAX), body=body,
                         to=[note.recipient], headers={"Message-ID": note.message_id})
    email.message()  # builds every header now, so a bad one fails here, not half-sent
    return email


def _give_up(note: Notification, request: ApprovalRequest, reason: str) -> str:
    """Mark `note` failed with its reason, and say so on its request (shown on the run's
    page and the request's page) so that a person learns the approvers were not told."""
    note.status = NotificationStatus.FAILED
    note.last_error = reason[:2000]
    problem = f"notification to {note.recipient} failed: {note.last_error}"[:2000]
    ApprovalRequest.objects.filter(pk=request.pk).update(problem=Case(
        When(problem="", then=Value(problem)),
        default=Concat(F("problem"), Value("; " + problem)), output_field=TextField()))
    logger.warning("notification %s to %s: given up: %s", note.pk, note.recipient,
                   note.last_error)
    return "failed"


# --- the sweep -----------------------------------------------------------------------------

@dataclass
class SweepReport:
    opened: int = 0
    withdrawn: int = 0
    escalated: int = 0
    timed_out: int = 0
    reminded: int = 0
    settled: int = 0
    sent: int = 0
    retrying: int = 0
    failed: int = 0
    skipped: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def sweep(*, now: datetime | None = None) -> SweepReport:
    """One pass of the approvals sweeper (Celery beat, every few seconds): open requests,
    withdraw stale ones, apply timeouts, send reminders, apply claimed decisions, deliver
    notifications. Each part works row by row in its own transactions; nothing is kept in
    memory between passes."""
    now = _now(now)
    report = SweepReport()
    report.opened = open_pending_requests(now=now)
    report.withdrawn = withdraw_stale_requests(now=now)
    timeouts = apply_timeouts(now=now)
    report.escalated, report.timed_out = timeouts.escalated, timeouts.timed_out
    report.reminded = send_reminders(now=now)
    report.settled = settle_decisions(now=now)
    published = publish_notifications(now=now)
    report.sent, report.retrying = published.sent, published.retrying
    report.failed, report.skipped = published.failed, published.skipped
    return report


# --- four eyes for operators ---------------------------------------------------------------
# When an operator action needs a second person is decided by runs.transitions
# (needs_second_person), which also refuses the action without one.

def request_operator_action(run: Run | int, *, action: str, requested_by, reason: str,
                            params: dict | None = None, approvers: list[str] | None = None,
                            now: datetime | None = None) -> tuple[ApprovalRequest, bool]:
    """Ask a second person to approve an operator's action on a run.

    The payload is the operator's request (action, run, reason, params). Anyone holding the
    decide permission may approve it except `requested_by`; the approvers named in
    settings.APPROVALS_FOUR_EYES_APPROVERS (or `approvers`) get it as an object permission
    and an email. Once approved, the action is performed through runs.actions with the
    approver as the second person. Returns (request, created): an open request for the
    same action on the same run is returned as it is rather than duplicated.
    """
    spec = ACTIONS.get(action)
    if spec is None or not spec.may_need_second_person:
        raise ValueError(f"{action!r} is not an operator action that takes a second person; "
                         f"those are: {', '.join(sorted(transitions.SECOND_PERSON_ACTIONS))}")
    if not reason or not reason.strip():
        raise ValueError("an operator action needs a reason")
    now = _now(now)
    run = run if isinstance(run, Run) else Run.objects.get(pk=run)
    names = list(approvers or settings.APPROVALS_FOUR_EYES_APPROVERS)
    high_impact = [s.name for s in transitions.high_impact_effects(
        list(Step.objects.filter(run=run).order_by("position")))]
    snapshot = normalise({
        "action": action, "run": run.pk, "workflow": run.workflow_name,
        "business_key": run.business_key, "run_status": run.status,
        "requested_by": requested_by.get_username(), "reason": reason.strip(),
        "params": params or {}, "completed_high_impact_steps": high_impact,
    })
    timeout = timedelta(seconds=settings.APPROVALS_FOUR_EYES_TIMEOUT_SECONDS)
    every = timedelta(seconds=settings.APPROVALS_FOUR_EYES_REMIND_SECONDS)
    existing = ApprovalRequest.objects.filter(run=run, kind=RequestKind.OPERATOR_ACTION,
                                              action=action, settled_at__isnull=True)
    try:
        with transaction.atomic(durable=True):
            found = existing.first()
            if found is not None:
                return found, False
            request = ApprovalRequest.objects.create(
                kind=RequestKind.OPERATOR_ACTION, run=run, action=action,
                params=snapshot["params"], requested_by=requested_by, snapshot=snapshot,
                snapshot_hash=snapshot_hash(snapshot), approvers=names, remind_every=every,
                timeout=timeout, on_timeout="cancel", requested_at=now, due_at=now + timeout,
                next_reminder_at=_next_reminder(now, every, now + timeout))
            _record_problems(request, _grant_and_notify(request, names,
                                                        NotificationKind.REQUEST, now))
    except IntegrityError:
        return existing.get(), False
    logger.info("operator action %s on run %s requested by %s: approval request %s",
                action, run.pk, requested_by.get_username(), request.pk)
    return request, True
