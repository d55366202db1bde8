"""Asking people: who an approval request's approvers are, the decide permission they get,
the notification outbox (one row per person, queued in the transaction that asks them), and
the publisher that sends what is due through Django's email backend.

Every function takes an optional `now` so tests drive the schedules with a controlled clock;
all state lives in the database, so a restart changes nothing.
"""

import errno
import logging
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import make_msgid

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.mail import EmailMessage
from django.db import transaction
from django.db.models import Case, F, TextField, Value, When
from django.db.models.functions import Concat, Now
from django.urls import reverse
from guardian.shortcuts import assign_perm

from audit.redaction import redact_text
from runs import store
from runs.duration_text import duration_text
from runs.machine.storable import printable

from .backoff import retry_delay
from .email_headers import header_text
from .models import (
    DECIDE_CODENAME,
    ApprovalRequest,
    Notification,
    NotificationKind,
    NotificationStatus,
    RequestKind,
)
from .permissions import can_decide, permissions_read_once
from .snapshots import snapshot_text
from .tokens import approval_link_token

logger = logging.getLogger(__name__)

NOTIFICATION_RETRY_SECONDS = 30
SUBJECT_MAX = Notification._meta.get_field("subject").max_length


def time_text(moment: datetime | None) -> str:
    """A time as people read it in a message: "2024-05-01 09:30 UTC" ("?" if unknown)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC") if moment else "?"


# --- approvers and the outbox --------------------------------------------------------------

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


def grant_and_notify(approval: ApprovalRequest, names: list[str], kind: str,
                     now: datetime) -> list[str]:
    """Grant the decide permission on `approval` to `names` and queue one notification per
    person with an email address, in the caller's transaction. Returns the problems found
    (unknown users or groups, people without an address): recorded, never raised."""
    users, groups, problems = _resolve(names)
    for user in users:
        assign_perm(DECIDE_CODENAME, user, approval)
    for group in groups:
        assign_perm(DECIDE_CODENAME, group, approval)
    recipients: dict[int, _Recipient] = {}
    seen = {approval.requested_by_id}  # four eyes: whoever asked is not asked to decide
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
    _queue_notifications(approval, list(recipients.values()), kind, now)
    return problems


def _queue_notifications(approval: ApprovalRequest, recipients: list[_Recipient], kind: str,
                         now: datetime) -> list[Notification]:
    if approval.run.drill:
        # A drill run's waits are decided by the drill itself: no person is written to.
        return []
    subject, body = _message(approval, kind)
    domain = settings.DEFAULT_FROM_EMAIL.rpartition("@")[2] or "localhost"
    return Notification.objects.bulk_create([
        Notification(request=approval, kind=kind, user=r.user, recipient=r.email,
                     subject=subject, body=body, next_attempt_at=now, created_at=now,
                     message_id=make_msgid(idstring=f"approval-{approval.pk}", domain=domain))
        for r in recipients
    ])


def _message(approval: ApprovalRequest, kind: str) -> tuple[str, str]:
    run = approval.run
    # Names and the business key come from callers and other systems: only their
    # header-safe form goes into the subject (and the same one-line form into the body).
    workflow, key = header_text(run.workflow_name), header_text(run.business_key)
    if approval.kind == RequestKind.STEP:
        what = f"{workflow} {key}: {header_text(approval.step_name)}"
    elif approval.kind == RequestKind.TOOL_CALL:
        what = (f"{workflow} {key}: tool {header_text(approval.params.get('tool', '?'))} "
                f"in {header_text(approval.step_name)}")
    elif approval.bulk_runs:
        # Approving it acts on every run of the job, of any workflow: naming the run it
        # hangs on would read as an action on that one run.
        what = (f"{header_text(approval.action)} of {len(approval.bulk_runs)} runs "
                f"(bulk job {approval.params['bulk_job']})")
    else:
        what = f"{header_text(approval.action)} of run {run.pk} ({workflow} {key})"
    prefix = {NotificationKind.REMINDER: "Reminder: ",
              NotificationKind.ESCALATION: "Escalated: "}.get(kind, "")
    subject = header_text(f"{prefix}approval needed: {what}", limit=SUBJECT_MAX)
    lines = [f"Your decision is needed: {what}."]
    if kind == NotificationKind.ESCALATION:
        lines.append(f"Nobody decided in time, so it now comes to you as well "
                     f"(escalation {approval.escalation_level}).")
    if approval.kind == RequestKind.OPERATOR_ACTION:
        lines.append("An operator asked for this action; it needs a second person's approval.")
    if approval.kind == RequestKind.TOOL_CALL:
        lines.append("The agent's model asked to call this tool. It runs only once approved, "
                     "once, with exactly these arguments; if rejected, the model is told.")
    shown = approval.snapshot
    if approval.bulk_runs:
        count = len(approval.bulk_runs)
        lines.append(f"Approving it takes the action on each of the {count} runs of bulk job "
                     f"{approval.params['bulk_job']}. "
                     + (f"The first {MAIL_RUNS_LISTED} are listed here; " if
                        count > MAIL_RUNS_LISTED else "")
                     + "the request's page, linked below, lists every one with its effects.")
        shown = mailed_bulk_snapshot(shown)
    lines += [f"Requested {time_text(approval.requested_at)}, "
              f"due {time_text(approval.due_at)}.", "",
              "What you are asked to approve:", snapshot_text(shown), "",
              f"Payload sha256: {approval.snapshot_hash}"]
    return subject, "\n".join(lines)


# Of a bulk job's request, how many of its runs (and of their high-impact effects) its
# messages list. Each message is stored, for each approver at each reminder: one that
# listed every run grew with the job, by about 53 bytes a run.
MAIL_RUNS_LISTED = 20


def mailed_bulk_snapshot(snapshot: dict) -> dict:
    """A bulk job's request's snapshot as its messages show it: its runs, and their
    high-impact effects, up to MAIL_RUNS_LISTED each, then how many more; the runs not
    repeated in its params. (The hash is of the whole snapshot, shown on the request's
    page.)"""
    shown = dict(snapshot)
    for key in ("runs", "high_impact_effects"):
        items = [str(item) for item in shown.get(key) or []]
        rest = len(items) - MAIL_RUNS_LISTED
        shown[key] = items[:MAIL_RUNS_LISTED] + ([f"and {rest} more"] if rest > 0 else [])
    without_bulk_params(shown)
    return shown


def without_bulk_params(snapshot: dict) -> None:
    """Take from a bulk request's shown snapshot the params that repeat its runs and its job
    (listed and linked on their own), and the params entry if nothing else is left."""
    params = {k: v for k, v in (snapshot.get("params") or {}).items()
              if k not in ("runs", "bulk_job")}
    if params:
        snapshot["params"] = params
    else:
        snapshot.pop("params", None)


# --- the outbox publisher ------------------------------------------------------------------

@dataclass
class PublishReport:
    sent: int = 0
    retrying: int = 0
    failed: int = 0
    skipped: int = 0
    # Not tried because the mail server gave no answer earlier in the pass.
    deferred: int = 0


def request_link(approval: ApprovalRequest, *, now: datetime | None = None) -> str:
    """The absolute, signed link to `approval` in its current state."""
    token = approval_link_token.make_token(approval, now=now)
    return public_url(reverse("approvals:link", kwargs={"pk": approval.pk, "token": token}))


def public_url(path: str) -> str:
    """`path` (from reverse()) as an absolute URL on APPROVALS_BASE_URL, the console's address
    for whoever follows a link sent out of it (an email, a webhook delivery): no request is
    at hand to say which host it was reached on."""
    return settings.APPROVALS_BASE_URL.rstrip("/") + path


def publish_notifications(*, now: datetime | None = None, limit: int = 100) -> PublishReport:
    """Send the notifications that are due, through Django's email backend.

    Each is sent holding its row's lock, so two publishers never send the same one; a
    failure schedules another attempt with exponential backoff, and after
    APPROVALS_NOTIFICATION_MAX_ATTEMPTS the notification is marked failed. A notification
    whose request no longer waits for anyone is skipped: nobody is asked about something
    already decided; so is one whose recipient may no longer decide it (deactivated, or no
    longer an approver since it was queued).

    Once the mail server gives no answer (no_answer), the rest of the pass is deferred: the
    sweep that calls this also applies every request's reminders and timeouts, and up to
    `limit` deliveries each waiting out EMAIL_TIMEOUT would hold them all back.

    Due, and dated (sent, tried again), by the database's clock, the one they are queued
    by with their request: `now`, a caller's time (a test's), stands in for it.
    """
    report = PublishReport()
    due = Notification.objects.filter(status=NotificationStatus.PENDING,
                                      next_attempt_at__lte=store.time_in_statement(now))
    server_retry_at = None  # when the server is tried again, once it gave no answer
    batch = list(due.order_by("next_attempt_at", "pk").values_list("pk", flat=True)[:limit])
    with recipients_read_once(batch) as recipients:
        for pk in batch:
            outcome, unanswered_until = _deliver(pk, now, server_retry_at, recipients)
            server_retry_at = server_retry_at or unanswered_until
            if outcome is not None:
                setattr(report, outcome, getattr(report, outcome) + 1)
    return report


@contextmanager
def recipients_read_once(batch: list[int]) -> Iterator[dict[int, object]]:
    """The recipients of notifications `batch` by user id, each with their grants on the
    batch's requests read once for all of them (approvals.permissions.permissions_read_once):
    whether each may still decide is then answered without a query per notification. The
    grants are those at the start of the batch (one pass of the publisher): a grant taken
    away during the pass counts from the next."""
    pairs = list(Notification.objects.filter(pk__in=batch, user__isnull=False)
                 .values_list("user_id", "request_id").distinct())
    users = get_user_model().objects.in_bulk({user_id for user_id, _ in pairs})
    # Only what the grants are read by: the requests' ids and kinds, not their snapshots.
    approvals = ApprovalRequest.objects.only("kind").in_bulk(
        {request_id for _, request_id in pairs})
    with ExitStack() as reading:
        for user_id, user in users.items():
            reading.enter_context(permissions_read_once(user, [
                approvals[request_id] for asked, request_id in pairs
                if asked == user_id and request_id in approvals]))
        yield users


def no_answer(exc: BaseException) -> bool:
    """Whether a failed send got no answer from the mail server at all (it timed out, or its
    host refused or could not be reached), as opposed to an answer about this message (a
    refusal with its code, a hang-up, an email API's error): then the server, not the
    message, is the problem, and the next delivery would wait for nothing the same way.
    smtplib reports a read that timed out as a disconnection, so the whole chain of the
    exception is looked at."""
    seen = set()  # a chain set by hand may loop
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, TimeoutError | ConnectionRefusedError) or (
                isinstance(exc, OSError) and exc.errno in UNREACHABLE):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


UNREACHABLE = (errno.EHOSTUNREACH, errno.ENETUNREACH)


def _deliver(pk: int, given: datetime | None, defer_until: datetime | None,
             recipients: dict[int, object]) -> tuple[str | None, datetime | None]:
    """(outcome, when the server is tried again if this attempt got no answer). With
    `defer_until`, nothing is sent: a notification still to be sent waits until then.
    `recipients`: the batch's, with their grants read (recipients_read_once)."""
    with transaction.atomic(durable=True):
        # The database's clock read with the row's lock (runs.store.time_of_lock, as a run
        # is locked): the request is not locked here, nor its run, while a mail is sent.
        note = (Notification.objects.select_for_update(skip_locked=True, of=("self",))
                .select_related("request", "request__run", "user").annotate(locked_at=Now())
                .filter(pk=pk, status=NotificationStatus.PENDING,
                        next_attempt_at__lte=store.time_in_statement(given))
                .first())
        if note is None:
            return None, None
        now = store.time_of_lock(note, given=given)
        approval = note.request
        if not approval.is_pending:
            note.status = NotificationStatus.SKIPPED
            note.last_error = f"request {approval.status} before delivery"
            note.save(update_fields=["status", "last_error"])
            return "skipped", None
        if (unasked := _no_longer_asked(note, approval, recipients)) is not None:
            # Queued while they were an approver: the mail would still hand the payload
            # and a link to someone who since left or lost the right to decide.
            note.status = NotificationStatus.SKIPPED
            note.last_error = unasked
            note.save(update_fields=["status", "last_error"])
            logger.info("notification %s to %s skipped: %s", note.pk, note.recipient, unasked)
            return "skipped", None
        # To the person's address as it is now: one they changed since this was queued (a
        # mailbox handed over, or no longer theirs) is not sent the payload and the link.
        note.recipient = note.user.email
        if defer_until is not None:
            # No attempt is counted (none was made). Moved to the time the server is tried
            # again rather than left due: each pass would otherwise spend a timeout on the
            # next one in line, and an outage of minutes would use up all their attempts.
            note.next_attempt_at = defer_until
            note.save(update_fields=["next_attempt_at"])
            return "deferred", None
        return _attempt(note, approval, now, given)


def _attempt(note: Notification, approval: ApprovalRequest, now: datetime,
             given: datetime | None) -> tuple[str, datetime | None]:
    note.attempts += 1
    unanswered_until = None
    try:
        email = _email(note, approval, given)
    except Exception as exc:
        # A message that cannot be built (a recipient address with a line break, say)
        # will not build on the next attempt either: it fails now, with its reason.
        outcome = _give_up(note, approval, f"cannot be built: {error_text(exc)}")
    else:
        try:
            email.send(fail_silently=False)
        except Exception as exc:
            error = error_text(exc)
            retry_at = now + timedelta(
                seconds=retry_delay(NOTIFICATION_RETRY_SECONDS, note.attempts))
            if no_answer(exc):
                unanswered_until = retry_at
            if note.attempts >= settings.APPROVALS_NOTIFICATION_MAX_ATTEMPTS:
                outcome = _give_up(note, approval,
                                   f"not sent after {note.attempts} attempts: {error}")
            else:
                note.last_error = error[:2000]
                note.next_attempt_at = retry_at
                outcome = "retrying"
                logger.warning("notification %s to %s: attempt %s failed: %s", note.pk,
                               note.recipient, note.attempts, note.last_error)
        else:
            note.status = NotificationStatus.SENT
            note.sent_at = now
            note.provider_message_id = note.message_id
            note.last_error = ""
            outcome = "sent"
    note.save(update_fields=["recipient", "status", "attempts", "next_attempt_at",
                             "last_error", "sent_at", "provider_message_id"])
    return outcome, unanswered_until


def error_text(exc: Exception) -> str:
    """What is kept of a failed delivery's exception (on the notification, its request and
    in the log): the mail server's or provider's answer may quote the key it was called
    with or the message itself, whose link decides the request, so it passes the redaction
    filter as any stored error does; a NUL in it is written out, since a row the database
    refuses would stop the outbox at this notification, and every one queued behind it."""
    return printable(redact_text(f"{type(exc).__name__}: {exc}"))


def _no_longer_asked(note: Notification, approval: ApprovalRequest,
                     recipients: dict[int, object]) -> str | None:
    """Why `note`'s recipient is not to be written to any more, or None. Their account as
    it is now (note.user, read with the note's lock); their grants as the batch read them
    (`recipients`), or read now for one that was not in it."""
    if note.user is None:
        return "the recipient's account was deleted before delivery"
    if not note.user.is_active:
        return f"{note.user.get_username()} was deactivated before delivery"
    if not can_decide(recipients.get(note.user_id, note.user), approval):
        return f"{note.user.get_username()} may no longer decide it (no longer an approver)"
    if not note.user.email:
        return f"{note.user.get_username()} has no email address any more"
    return None


def _email(note: Notification, approval: ApprovalRequest,
           given: datetime | None) -> EmailMessage:
    """The notification as an email, its headers checked: raises if it cannot be built.
    Its link is stamped by the clock links are checked by (approvals.tokens), or `given`."""
    max_age = duration_text(timedelta(seconds=settings.APPROVAL_LINK_MAX_AGE))
    body = (f"{note.body}\n\nOpen the request (sign in first; the link works for "
            f"{max_age} and only while the request is pending):\n"
            f"{request_link(approval, now=given)}\n")
    # The subject again through header_text: rows queued before subjects were sanitised.
    email = EmailMessage(subject=header_text(note.subject, limit=SUBJECT_MAX), body=body,
                         to=[note.recipient], headers={"Message-ID": note.message_id})
    email.message()  # builds every header now, so a bad one fails here, not half-sent
    return email


def _give_up(note: Notification, approval: ApprovalRequest, reason: str) -> str:
    """Mark `note` failed with its reason, and say so on its request (shown on the run's
    page and the request's page) so that a person learns the approvers were not told."""
    note.status = NotificationStatus.FAILED
    note.last_error = reason[:2000]
    problem = failure_note(note.recipient, note.last_error)
    # Appended by the database: the publisher does not lock the request, and a reminder
    # writing it meanwhile (request_problem) must not lose this note, nor this one its.
    ApprovalRequest.objects.filter(pk=approval.pk).update(problem=Case(
        When(problem="", then=Value(problem)),
        default=Concat(F("problem"), Value("; " + problem)), output_field=TextField()))
    logger.warning("notification %s to %s: given up: %s", note.pk, note.recipient,
                   note.last_error)
    return "failed"


def failure_note(recipient: str, error: str) -> str:
    """How a request's "problem" names a notification of it that failed."""
    return f"notification to {recipient} failed: {error}"[:2000]


def request_problem(approval: ApprovalRequest, problems: list[str]) -> str:
    """What `approval`'s "problem" says once its approvers were looked up again (opened,
    reminded, escalated), the one rule for every writer but _give_up (which appends a note
    this rule keeps). `problems` (an unknown group, someone without an address) are replaced
    by each look-up, since a group created meanwhile is asked from then on. A notification
    that failed stands: whatever was sent since, a person must still learn that an approver
    was not told (the runbook sends them to this field for it)."""
    failed = (Notification.objects.filter(request=approval, status=NotificationStatus.FAILED)
              .order_by("pk").values_list("recipient", "last_error"))
    return "; ".join([*problems, *(failure_note(to, error) for to, error in failed)])
