"""Reads of archived runs: search by business key, one run's tombstone, archived heads."""

from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import closing

from django.db.models import Func, JSONField, Value

from audit.quoting import file_name
from runs.machine.storable import whole_number
from runs.permissions import VIEW, grant_for

from .models import ArchivedRun, ArchiveFile, ArchiveRemoval

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


def archived_runs_viewable(user, run_ids: Iterable[int]) -> dict[int, ArchivedRun]:
    """{original run id: tombstone} of those of `run_ids` that were archived and whose
    workflow's runs `user` may view: the runs the console and the command line tell this
    person were archived, naming the file. To anyone else an archived run is still no run:
    naming it would tell them that it existed."""
    grant = grant_for(user, VIEW)
    return {tombstone.original_run_id: tombstone
            for tombstone in ArchivedRun.objects.select_related("archive_file")
            .filter(original_run_id__in=list(run_ids))
            if grant.covers(tombstone.workflow_id)}


def archived_run_viewable(user, run_id: int) -> ArchivedRun | None:
    """The tombstone of run `run_id` if it was archived and `user` may view it, else None
    (archived_runs_viewable)."""
    return archived_runs_viewable(user, [run_id]).get(run_id)


def gone_to_archive(tombstone: ArchivedRun) -> str:
    """What is said of an archived run where it is asked for: how it finished and the file
    it is in."""
    return (f"run {tombstone.original_run_id} finished ({tombstone.final_status}) and was "
            f"archived to {file_name(tombstone.archive_file.name)}")


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


def archived_heads(run_ids: list[int]) -> dict[int, tuple[int, str]]:
    """{run id: (seq, hash)}: the head of each run's chain as its archive file closed it, for
    the runs of `run_ids` that were archived (audit.checkpoints judges them by it)."""
    files: dict[int, list[int]] = {}
    for run_id, file_id in ArchivedRun.objects.filter(original_run_id__in=run_ids) \
            .values_list("original_run_id", "archive_file_id"):
        files.setdefault(file_id, []).append(run_id)
    heads = {}
    for file_id, file_heads in ArchiveFile.objects.filter(pk__in=list(files)) \
            .values_list("pk", "heads"):
        for run_id in files[file_id]:
            if (head := file_heads.get(str(run_id))) is not None:
                heads[run_id] = (int(head[0]), str(head[1]))
    return heads


def recorded_files() -> Iterator[tuple[str, str]]:
    """(name, sha256) of every archive file the catalogue records, oldest first."""
    return (ArchiveFile.objects.order_by("pk").values_list("name", "sha256")
            .iterator(chunk_size=2000))


def recorded_file_digests(names: list[str]) -> dict[str, str]:
    """{name: sha256} of the archive files of `names` the catalogue records."""
    return dict(ArchiveFile.objects.filter(name__in=names).values_list("name", "sha256"))


def archived_head(run_id: int) -> tuple[int, str] | None:
    """(seq, hash): the head of one archived run's chain as its file closed it, or None. The
    file's heads (one per run, thousands) are read in the database for the run's key alone;
    jsonb_extract_path takes the key as text, where the ORM's key lookup reads a number as an
    array index."""
    found = (ArchivedRun.objects.filter(original_run_id=run_id)
             .annotate(head=Func("archive_file__heads", Value(str(run_id)),
                                 function="jsonb_extract_path", output_field=JSONField()))
             .values_list("head", flat=True).first())
    if not isinstance(found, list) or len(found) != 2:
        return None
    return int(found[0]), str(found[1])


def tombstones_against_their_files() -> Iterator[tuple[int, str, str | None]]:
    """(run id, file name, why or None) of each tombstone, checked against the archive file
    it names: why says how the file does not back it (its heads do not hold the run, or the
    file kept the run in the hot tables: it changed after it was written, so no removal
    tombstoned it to this file). Read a file at a time, its heads once for all its
    tombstones: a million tombstones cost a thousand files' heads, never a file's heads per
    tombstone."""
    files = (ArchiveFile.objects.order_by("pk")
             .values_list("pk", "name", "heads", "kept_run_ids").iterator(chunk_size=10))
    with closing(files):
        for file_id, name, heads, kept in files:
            kept = set(kept or ())
            for run_id in (ArchivedRun.objects.filter(archive_file_id=file_id)
                           .order_by("original_run_id")
                           .values_list("original_run_id", flat=True)):
                if str(run_id) not in heads:
                    yield run_id, name, "its archive file does not hold it"
                elif run_id in kept:
                    yield run_id, name, ("its archive file kept it in the hot tables (it "
                                         "changed after it was written, or another session "
                                         "held it)")
                else:
                    yield run_id, name, None
