"""Reads of the audit trail for the console's audit page and its CSV export."""

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Max, QuerySet

from .models import AuditRecord


def audit_records(*, actor: str = "", action: str = "", run: int | None = None,
                  since: datetime | None = None, until: datetime | None = None,
                  by: str = "", workflow_ids: frozenset[int] | None = None,
                  actor_kind: dict | None = None) -> QuerySet:
    """Audit records matching the filters, newest first (ids grow with time). `by`: an
    actor kind ("user": people's records, along audit_person_idx; "system"). `actor_kind`:
    actor_kind_of(actor), when the caller has it already (audit_listing)."""
    records = AuditRecord.objects.select_related("run")
    if workflow_ids is not None:
        records = records.filter(run__workflow_id__in=workflow_ids)
    if by:
        records = records.filter(actor_kind=by)
    if actor:
        kind = actor_kind if actor_kind is not None else \
            actor_kind_of(actor, workflow_ids=workflow_ids)
        records = records.filter(actor_label=actor, **kind)
    if action:
        records = records.filter(action=action)
    if run:
        records = records.filter(run_id=run)
    if since:
        records = records.filter(created_at__gte=since)
    if until:
        records = records.filter(created_at__lt=until)
    return records.order_by("-pk")


def actor_kind_of(label: str, *, workflow_ids: frozenset[int] | None = None) -> dict:
    """The filter on the actor's kind that an actor filter of `label` adds, for one who
    sees the runs of `workflow_ids` (None: every workflow's).

    A person's name is read along audit_person_label_idx (people's records only, so the
    system's, nearly every record, add nothing to it), where a filter on the label alone
    reads the log backwards to its start for a name on a few records. A name is a person's
    when people's records that the reader may see carry it (the look is one probe of that
    index). Whether an account has it is not asked: the page would tell anyone who may
    filter it which usernames exist (an account's name on no record they see was read one
    way, any other name another, and said so). So a person with no record the reader sees
    is read as a name no one has, and both answer alike. Any other label (a worker, the
    sweeper, an API token, a name no one ever had) is read on the label alone: no index may
    cost the system's records a write. So a system actor named as a person is found under
    that name only while no record of a person's the reader sees carries it."""
    people = AuditRecord.objects.filter(actor_kind=AuditRecord.ActorKind.USER,
                                        actor_label=label)
    if workflow_ids is not None:
        people = people.filter(run__workflow_id__in=workflow_ids)
    if people.exists():
        return {"actor_kind": AuditRecord.ActorKind.USER}
    return {}


# The records one page of the audit page reads back at most when no index answers its
# filter (an actor label no person has: a typo, a worker, an API token): a page of matches
# or this many records, whichever comes first. A label on no record at all read the log
# backwards to its start, millions of rows, for an empty page.
SCAN_WINDOW = 100_000
PAGE_SIZE = 100


@dataclass(frozen=True)
class AuditPage:
    records: list
    # Where the next page starts (its `before`), or None at the log's start.
    next_before: int | None
    # Set when the page ended at its window, not at a page of matches or the log's start:
    # the lowest id it read. Older records are read by the next page.
    read_back_to: int | None = None
    # The most records the page read back (SCAN_WINDOW), when it read a window.
    window: int | None = None


def audit_listing(*, workflow_ids: frozenset[int] | None = None,
                  **filters) -> tuple[QuerySet, bool]:
    """audit_records of `filters`, and whether they are found only by reading the log
    backwards, so that a page of them reads a window (audit_page): an actor no index holds
    (actor_kind_of, asked once for both), with no run to read along (a run's records are
    read along its own index, however old)."""
    actor = filters.get("actor", "")
    kind = actor_kind_of(actor, workflow_ids=workflow_ids) if actor else {}
    records = audit_records(**filters, workflow_ids=workflow_ids, actor_kind=kind)
    # A person's name asked among people's records is read along their label's index
    # whether or not an account has it: no window.
    indexed = kind or filters.get("by") == AuditRecord.ActorKind.USER
    return records, bool(actor) and not filters.get("run") and not indexed


def audit_page(records: QuerySet, *, before: int | None, windowed: bool) -> AuditPage:
    """The page of `records` (newest first) below id `before`. `windowed`: read at most
    SCAN_WINDOW ids back (audit_listing says when), and say where it stopped."""
    if before is not None:
        records = records.filter(pk__lt=before)
    if not windowed:
        page = list(records[:PAGE_SIZE])
        return AuditPage(page, page[-1].pk if len(page) == PAGE_SIZE else None)
    # From the newest record at most: a `before` far above it (an address edited by hand)
    # would otherwise take a page for each window of ids no record has.
    top = (AuditRecord.objects.aggregate(head=Max("pk"))["head"] or 0) + 1
    top = min(top, before) if before is not None else top
    low = max(top - SCAN_WINDOW, 0)
    page = list(records.filter(pk__gte=low)[:PAGE_SIZE])
    if len(page) == PAGE_SIZE:
        return AuditPage(page, page[-1].pk)
    if not AuditRecord.objects.filter(pk__lt=low).exists():
        return AuditPage(page, None)
    return AuditPage(page, low, read_back_to=low, window=SCAN_WINDOW)
