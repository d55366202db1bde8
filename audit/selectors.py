"""Reads of the audit trail for the console's audit page and its CSV export."""

from datetime import datetime

from django.contrib.auth import get_user_model
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
        records = records.filter(actor_label=actor, **actor_kind_of(actor))
    if action:
        records = records.filter(action=action)
    if run:
        records = records.filter(run_id=run)
    if since:
        records = records.filter(created_at__gte=since)
    if until:
        records = records.filter(created_at__lt=until)
    return records.order_by("-pk")


def actor_kind_of(label: str) -> dict:
    """The filter on the actor's kind that an actor filter of `label` adds.

    A person's name is read along audit_person_label_idx (people's records only, so the
    system's, nearly every record, add nothing to it), where a filter on the label alone
    reads the log backwards to its start for a name on a few records. A name is a person's
    when an account has it, or when people's records carry it (an account deleted or
    renamed since: its past records keep the name; the look is one probe of that index).
    Any other label (a worker, the sweeper, an API token, a name no one ever had) is read
    as before, on the label alone: no index may cost the system's records a write. So a
    system actor named as a person is found under that name only while no person has it."""
    account = get_user_model()
    if account._default_manager.filter(**{account.USERNAME_FIELD: label}).exists() or \
            AuditRecord.objects.filter(actor_kind=AuditRecord.ActorKind.USER,
                                       actor_label=label).exists():
        return {"actor_kind": AuditRecord.ActorKind.USER}
    return {}
