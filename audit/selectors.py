"""Reads of the audit trail for the console's audit page and its CSV export."""

from datetime import datetime

from django.db.models import QuerySet

from .models import AuditRecord


def audit_records(*, actor: str = "", action: str = "", run: int | None = None,
                  since: datetime | None = None, until: datetime | None = None,
                  workflow_ids: frozenset[int] | None = None) -> QuerySet:
    """Audit records matching the filters, newest first (ids grow with time)."""
    records = AuditRecord.objects.select_related("run")
    if workflow_ids is not None:
        records = records.filter(run__workflow_id__in=workflow_ids)
    if actor:
        records = records.filter(actor_label=actor)
    if action:
        records = records.filter(action=action)
    if run:
        records = records.filter(run_id=run)
    if since:
        records = records.filter(created_at__gte=since)
    if until:
        records = records.filter(created_at__lt=until)
    return records.order_by("-pk")
