"""Reads of archived runs for the console: search by business key, one run's tombstone."""

from collections import Counter

from runs.machine.storable import whole_number

from .models import ArchivedRun, ArchiveRemoval

SEARCH_LIMIT = 20


def archived_matching(q: str, *, workflow_ids: frozenset[int] | None,
                      limit: int = SEARCH_LIMIT) -> list[ArchivedRun]:
    """Archived runs the user may see whose business key starts with `q` (through the
    tombstones' prefix index), or whose original run id is `q`; newest archived first."""
    q = q.strip()
    if not q:
        return []
    tombstones = ArchivedRun.objects.select_related("archive_file")
    if workflow_ids is not None:
        tombstones = tombstones.filter(workflow_id__in=workflow_ids)
    found = list(tombstones.filter(business_key__startswith=q).order_by("-archived_at", "-pk")
                 [:limit])
    run_id = whole_number(q)
    if run_id is not None and all(t.original_run_id != run_id for t in found):
        found += list(tombstones.filter(original_run_id=run_id))
    return found


def archived_run(run_id: int) -> ArchivedRun:
    """The tombstone of original run `run_id` (ArchivedRun.DoesNotExist if none)."""
    return ArchivedRun.objects.select_related("archive_file").get(original_run_id=run_id)


def archived_for_key(workflow: str, business_key: str) -> ArchivedRun | None:
    """The tombstone of (workflow, business key), for start_run (runs.machine.retention): one probe
    of the unique index; the archive file is read only when one is found."""
    return ArchivedRun.objects.filter(workflow_name=workflow, business_key=business_key).first()


def removed_audit_actions() -> Counter:
    """Audit records removed to archives, by action, from the removals' own counts."""
    removed = Counter()
    for counts in (ArchiveRemoval.objects.exclude(audit_actions=None)
                   .values_list("audit_actions", flat=True).iterator()):
        removed.update(counts)
    return removed
