"""One chronological timeline of a run for its page: every audit record (which holds the
approval lifecycle, late results and operator actions), the approval notifications that
went out, and the progress events delivered to webhook subscribers.

A run retried for days has hundreds of audit records, and drawing each one costs the page
about half a millisecond: the page shows the newest PAGE records and what happened among
them, and older ones a page at a time on request (timeline_page). Each page costs the same
four queries and the same drawing, whatever the length of the run's log."""

import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models.functions import Coalesce
from django.utils import timezone

from api.selectors import deliveries_of
from approvals.models import Notification
from approvals.problem_shown import without_addresses
from audit.models import AuditRecord
from audit.redaction import sealed_masked

from .diffs import DiffRow, diff_rows

_WORKER = re.compile(r"^(?P<host>[^:\s]+):(?P<pid>\d+)$")
# Audit records on one page of the timeline.
PAGE = 20


@dataclass(frozen=True)
class Entry:
    at: datetime
    source: str  # audit, notification or webhook
    title: str
    actor: str = ""
    step: str = ""
    reason: str = ""
    detail: str = ""
    seq: int | None = None
    diff: list[DiffRow] = field(default_factory=list)
    data: str = ""  # the record's data as readable JSON

    # The page's times, formatted once here: the template's date filter costs about a
    # tenth of a millisecond a call, two calls a row (and a property is computed again at
    # each use).
    when: str = field(init=False, repr=False, compare=False)
    iso: str = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        local = timezone.localtime(self.at)
        object.__setattr__(self, "when", f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}")
        object.__setattr__(self, "iso", local.isoformat())


def actor_name(label: str, kind: str = "") -> str:
    """A worker ("host:pid") named by host and process; people and others as they are."""
    match = _WORKER.match(label)
    if match:
        return f"worker on {match['host']} (process {match['pid']})"
    return f"{label} (system)" if kind == AuditRecord.ActorKind.SYSTEM else label


def _object(value) -> dict:
    # Every record is written with objects; one rewritten past the triggers may hold any
    # JSON. Its data is still shown whole (readable), and the chain check names it.
    return value if isinstance(value, dict) else {}


def audit_entry(record: AuditRecord) -> Entry:
    """An audit record as the timeline shows it: a sealed value it keeps (a late result's,
    as the call's row holds it) as the mask (sealed_masked); the record itself, evidence
    bound into its chain, stays as written."""
    data, before, after = (sealed_masked(value)
                           for value in (record.data, record.before, record.after))
    return Entry(at=record.created_at, source="audit", title=record.action.replace("_", " "),
                 actor=actor_name(record.actor_label, record.actor_kind),
                 step=record.step_name, reason=record.reason,
                 detail=_object(data).get("error", ""), seq=record.seq,
                 diff=[row for row in diff_rows(_object(before), _object(after))
                       if row.changed],
                 data=readable(data))


def readable(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) \
        if value else ""


@dataclass(frozen=True)
class Timeline:
    entries: list[Entry]
    # The seq to ask for the page before this one with (?before=), None when none is older.
    older: int | None
    older_records: int  # audit records before this page
    before: int | None  # the page was asked for with ?before= (not the newest)


def timeline_page(run, *, before: int | None = None, size: int = PAGE,
                  approval_requests: list | None = None, addresses: bool = False) -> Timeline:
    """The `size` audit records of `run` before seq `before` (without it: the newest), with
    the notifications and webhook deliveries that happened between the first of them and
    the next page's first: pages follow one another without a gap or an overlap.
    `approval_requests`, when the caller has read the run's, saves the query for
    notifications if there are none (a notification belongs to an approval request).
    `addresses`: whether the reader may see the notifications' addresses (run_timeline)."""
    records = (AuditRecord.objects.filter(run=run).order_by("-seq")
               .defer("run", "actor_user_id", "prev_hash", "hash"))
    until = None
    if before is not None:
        records = records.filter(seq__lt=before)
        until = (AuditRecord.objects.filter(run=run, seq=before)
                 .values_list("created_at", flat=True).first())
    records = list(records[:size + 1])
    more = len(records) > size
    records = records[:size][::-1]
    since = records[0].created_at if more else None
    notifications = approval_requests is None or bool(approval_requests)
    return Timeline(entries=run_timeline(run, records, since=since, until=until,
                                         notifications=notifications, addresses=addresses),
                    older=records[0].seq if more else None,
                    older_records=records[0].seq - 1 if records else 0, before=before)


def run_timeline(run, audit: list[AuditRecord], *, since: datetime | None = None,
                 until: datetime | None = None, notifications: bool = True,
                 addresses: bool = False) -> list[Entry]:
    """The run's timeline, oldest first (audit records in their chain's order):
    `audit`, and the notifications (unless `notifications` is False: the caller knows
    there are none) and deliveries from `since` (included) to `until`. A notification names
    its approver by address, and its error without addresses, unless `addresses` (a reader
    who may see the notifications: approvals.problem_shown)."""
    entries = [audit_entry(r) for r in audit]
    notes = (Notification.objects.filter(request__run=run).select_related("request", "user")
             .only("kind", "recipient", "sent_at", "last_error", "request__step_name",
                   "user__username")
             .annotate(at=Coalesce("sent_at", "created_at")))
    # A status change is delivered from its event, a step's outcome from its audit record.
    deliveries = (deliveries_of([run.pk])
                  .select_related("subscriber", "event", "record")
                  .only("delivered_at", "last_error", "subscriber__name", "event__step_name",
                        "event__outcome", "event__status_from", "event__status_to",
                        "record__step_name", "record__action")
                  .annotate(at=Coalesce("delivered_at", "event__created_at",
                                        "record__created_at")))
    if since is not None:
        notes, deliveries = notes.filter(at__gte=since), deliveries.filter(at__gte=since)
    if until is not None:
        notes, deliveries = notes.filter(at__lt=until), deliveries.filter(at__lt=until)
    for note in (notes.order_by("pk") if notifications else []):
        if note.sent_at is None and not note.last_error:
            continue
        to = (note.recipient if addresses
              else note.user.get_username() if note.user is not None else "an approver")
        entries.append(Entry(
            at=note.at, source="notification",
            title=f"{note.get_kind_display()} email "
                  f"{'sent' if note.sent_at else 'not sent'} to {to}",
            step=note.request.step_name,
            detail=note.last_error if addresses else without_addresses(note.last_error)))
    for delivery in deliveries.order_by("pk"):
        if delivery.delivered_at is None and not delivery.last_error:
            continue
        event, record = delivery.event, delivery.record
        if record is not None:
            step, what = record.step_name, f"{record.step_name} {record.action}"
        else:
            step = event.step_name
            what = (f"{event.step_name} {event.outcome}" if event.step_name
                    else f"{event.status_from} → {event.status_to}")
        entries.append(Entry(
            at=delivery.at, source="webhook",
            title=f"progress event ({what}) "
                  f"{'delivered' if delivery.delivered_at else 'not delivered'} to "
                  f"{delivery.subscriber.name}",
            step=step, detail=delivery.last_error))
    return in_chain_order(entries[:len(audit)], entries[len(audit):])


def in_chain_order(audit: list[Entry], others: list[Entry]) -> list[Entry]:
    """The audit entries in their chain's order, always, and the others (oldest first) each
    before the first audit entry later than it. A chain's order is its truth; its records'
    times may not follow it by a few milliseconds (each process stamps its records by its
    own estimate of the database's clock, measured again every 30 s), and sorting all by
    time put a later record before an earlier one."""
    order = {"notification": 1, "webhook": 2}
    others = sorted(others, key=lambda e: (e.at, order[e.source]))
    merged, taken = [], 0
    for entry in audit:
        while taken < len(others) and others[taken].at < entry.at:
            merged.append(others[taken])
            taken += 1
        merged.append(entry)
    return merged + others[taken:]
