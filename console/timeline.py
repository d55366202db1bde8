"""One chronological timeline of a run for its page: every audit record (which holds the
approval lifecycle, late results and operator actions), the approval notifications that
went out, and the progress events delivered to webhook subscribers. Three queries besides
the audit records the page already has, whatever the run's size."""

import json
import re
from dataclasses import dataclass, field
from datetime import datetime

from api.models import WebhookDelivery
from approvals.models import Notification
from audit.models import AuditRecord

from .diffs import DiffRow, diff_rows

_WORKER = re.compile(r"^(?P<host>[^:\s]+):(?P<pid>\d+)$")


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


def actor_name(label: str, kind: str = "") -> str:
    """A worker ("host:pid") named by host and process; people and others as they are."""
    match = _WORKER.match(label)
    if match:
        return f"worker on {match['host']} (process {match['pid']})"
    return f"{label} (system)" if kind == AuditRecord.ActorKind.SYSTEM else label


def readable(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str) \
        if value else ""


def run_timeline(run, audit: list[AuditRecord]) -> list[Entry]:
    """The run's timeline, oldest first (audit records keep their chain order on a tie)."""
    entries = [Entry(at=r.created_at, source="audit", title=r.action.replace("_", " "),
                     actor=actor_name(r.actor_label, r.actor_kind), step=r.step_name,
                     reason=r.reason, detail=(r.data or {}).get("error", ""), seq=r.seq,
                     diff=[row for row in diff_rows(r.before, r.after) if row.changed],
                     data=readable(r.data))
               for r in audit]
    for note in (Notification.objects.filter(request__run=run)
                 .select_related("request").order_by("pk")):
        if note.sent_at is None and not note.last_error:
            continue
        entries.append(Entry(
            at=note.sent_at or note.created_at, source="notification",
            title=f"{note.get_kind_display()} email "
                  f"{'sent' if note.sent_at else 'not sent'} to {note.recipient}",
            step=note.request.step_name, detail=note.last_error))
    for delivery in (WebhookDelivery.objects.filter(event__run=run)
                     .select_related("subscriber", "event").order_by("pk")):
        if delivery.delivered_at is None and not delivery.last_error:
            continue
        event = delivery.event
        what = (f"{event.step_name} {event.outcome}" if event.step_name
                else f"{event.status_from} → {event.status_to}")
        entries.append(Entry(
            at=delivery.delivered_at or event.created_at, source="webhook",
            title=f"progress event ({what}) "
                  f"{'delivered' if delivery.delivered_at else 'not delivered'} to "
                  f"{delivery.subscriber.name}",
            step=event.step_name, detail=delivery.last_error))
    order = {"audit": 0, "notification": 1, "webhook": 2}
    entries.sort(key=lambda e: (e.at, order[e.source], e.seq or 0))
    return entries
