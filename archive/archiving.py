"""Moving finished runs out of the hot tables into archive files.

A run is archived once it is final (completed, compensated, terminated) and both its last
status change and its finish are older than its workflow's retention: the Workflow's
`retention_days`, else the RUNS_RETENTION_DAYS setting (90 days), and no app still has work
for it (archive.parts.pending: a webhook delivery an active subscriber has not had yet).
Such a run is held: it stays hot, and a later pass takes it once the work is done.

One pass, run by beat (archive.tasks) or by `manage.py archive_runs`, holds the job's lock
(runs.machine.single_pass) so two passes never archive the same runs (`manage.py
remove_drill_runs` takes the same lock: archive.drill_runs), and for each file of up to
ARCHIVE_RUNS_PER_FILE runs:

1. asks each app for its rows of the runs (archive.parts: the runs and their steps,
   events, agent turns and tool calls; audit records; approval requests and notifications;
   webhook deliveries) in one repeatable-read snapshot, RUNS_PER_READ runs at a time, and
   writes them as gzip-compressed JSON Lines (a header line, one line per run with its
   seal, then the file's seal: see audit.seals) to the archive storage (STORAGES
   "archive", any django-storages backend, else the file system under VAR_DIR/archive);
2. records the file (ArchiveFile: name, sha256, size, the head of every chain it closes)
   and commits, before anything is removed;
3. removes the runs from the hot tables, ARCHIVE_REMOVE_BATCH runs per short transaction:
   lock the run rows, passing over any that another session holds (kept hot, for the next
   pass), keep any run that changed since it was read (an operator reopened a
   terminated run, a late result was recorded: its chain head moved), write a tombstone per
   run (ArchivedRun, which start_run consults through runs.machine.retention), let each app
   delete its rows, and log the removal (ArchiveRemoval: who, when, which file, which chain heads).

The audit table stays append-only: the model refuses every delete, and the database trigger
(this app's migrations 0002 and 0005) refuses a DELETE unless the transaction declared the
archive file it archives to (SET LOCAL audit.archival = its sha256), the record's run has a
tombstone pointing at that file, and the file's recorded heads hold the run at the last
record removed. Only step 3 does all three.

A crash leaves nothing half done that matters: the runs of a file written but not recorded
are archived again by the next pass, and a pass an hour on deletes that file; a file cut
short by the crash never has its name; the next pass deletes what is left of it (both in
archive.writing);
a file recorded but not fully removed is finished by the next pass (finish_unfinished).
Step results kept as artifacts (runs.machine.artifacts) stay in their storage; the archive
keeps their references.
"""

import getpass
import gzip
import hashlib
import json
import os
import socket
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import OperationalError, transaction
from django.db.models import Count, Q

from audit import seals
from audit.models import AuditRecord
from audit.offline import to_json
from runs import store
from runs.definitions import definition
from runs.execution.database_outage import would_not_wait
from runs.machine import crashpoints
from runs.machine.single_pass import single_pass
from runs.models import FINAL_RUN_STATUSES, OF_REAL_WORK, Run

from . import parts, writing
from .models import ArchivedRun, ArchiveFile, ArchiveRemoval
from .reading import storage

JOB = "archive.archive_runs"
# Runs whose rows are read, and held in memory, at once while a file is written. A run's
# rows can weigh megabytes (each step's result is kept inline up to
# RUNS_RESULT_INLINE_BYTES, with its audit records, agent turns and tool calls): read all
# ARCHIVE_RUNS_PER_FILE at once, one file took hundreds of MB to GBs. Not one run at a
# time: each read is a statement per part (about ten), which a few runs share.
RUNS_PER_READ = 20
# 2: every run sealed, and the file too (audit.seals).
FORMAT = 2
# What removal reads of a run (not its input): the checks and the tombstone.
TOMBSTONE_FIELDS = ("status", "audit_seq", "audit_head", "workflow_id", "workflow_name",
                    "workflow_version", "business_key", "input_hash", "created_at",
                    "finished_at")


def retention_days(workflow_name: str) -> int:
    """How many days a finished run of `workflow_name` stays in the hot tables."""
    workflow_def = definition.registry.latest(workflow_name)
    override = getattr(workflow_def, "retention_days", None)
    return settings.RUNS_RETENTION_DAYS if override is None else override


def cut_for(now: datetime, days: int) -> datetime | None:
    """The time a run must have finished (and last changed) before to be archived after
    `days` of retention; None when that falls before the first day a datetime holds (a
    retention meant as "for ever", a million days): no run is that old."""
    try:
        return now - timedelta(days=days)
    except OverflowError:
        return None


def eligible(now: datetime, older_than_days: int | None = None):
    """The finished runs whose retention is over (or, with `older_than_days`, that finished
    longer ago than that, whatever their workflow says), oldest first.

    Read through the (status, updated_at) index: a final run's updated_at is when it became
    final (or changed since), so the range on it bounds the scan to old finished runs."""
    default_days = settings.RUNS_RETENTION_DAYS if older_than_days is None else older_than_days
    default_cut = cut_for(now, default_days)
    overrides = {}
    for name in definition.registry.names() if older_than_days is None else ():
        days = retention_days(name)
        if days != default_days:
            overrides[name] = cut_for(now, days)
    cuts = [cut for cut in [default_cut, *overrides.values()] if cut is not None]
    if not cuts:
        return Run.objects.none()
    newest_cut = max(cuts)

    def older_than(cut):
        if cut is None:
            # Kept for ever: one workflow's retention past the calendar must not stop the
            # pass (an OverflowError, every pass) for every other workflow.
            return Q(pk__in=[])
        return Q(updated_at__lt=cut) & (Q(finished_at__isnull=True) | Q(finished_at__lt=cut))

    per_workflow = ~Q(workflow_name__in=list(overrides)) & older_than(default_cut)
    for name, cut in overrides.items():
        per_workflow |= Q(workflow_name=name) & older_than(cut)
    return (Run.objects.filter(status__in=list(FINAL_RUN_STATUSES), updated_at__lt=newest_cut)
            .filter(per_workflow).order_by("updated_at", "pk"))


def overdue_seconds(now: datetime) -> float:
    """How long past its retention the first run due for archiving (the one that last
    changed longest ago) has stayed in the hot tables, 0 if none is due: what an alert reads
    when archive passes stop (beat down, the archive storage refusing files). A run an app
    still holds (a webhook not yet delivered, archive.parts) counts too: it is behind all
    the same."""
    first = eligible(now).values_list("workflow_name", "updated_at", "finished_at").first()
    if first is None:
        return 0.0
    name, updated_at, finished_at = first
    cut = cut_for(now, retention_days(name))
    ended = max(updated_at, finished_at or updated_at)
    return max((cut - ended).total_seconds(), 0.0) if cut is not None else 0.0


@dataclass
class ArchiveReport:
    files: list[str] = field(default_factory=list)
    runs_written: int = 0
    runs_removed: int = 0
    runs_kept: int = 0
    # Eligible, but an app still had work for them (archive.parts.pending): left hot.
    runs_held: int = 0
    bytes_written: int = 0
    # With dry_run: how many runs a pass would archive (up to its maximum).
    eligible: int = 0
    dry_run: bool = False
    # Another pass held the job's lock: this one did nothing.
    locked_out: bool = False
    # Left in storage by writes killed before the end (archive.writing), deleted.
    partial_files_removed: int = 0
    # Held by another session when their removal came: kept hot (in kept_run_ids, as the
    # changed ones) for the next pass.
    runs_busy: int = 0
    # remove_drill_runs: drill runs past ARCHIVE_MAX_RUNS_PER_PASS, left for the next.
    runs_left: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def default_actor() -> str:
    """user@host of the process. A container's arbitrary user id often has neither a passwd
    entry nor a USER variable (getpass then raises): it is named by its id instead."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def refuse_sizes(*, runs_per_file: int, max_runs: int, remove_batch: int) -> None:
    """Refuse, before anything is written, settings no pass can work with: a removal batch
    of 0 would fail once the first file is recorded (and then every later pass, finishing
    it), a file of 0 runs or a negative maximum archive nothing without saying so."""
    problems = [f"{name} is {value}; it must be {least} or more"
                for name, value, least in (("ARCHIVE_RUNS_PER_FILE", runs_per_file, 1),
                                           ("ARCHIVE_REMOVE_BATCH", remove_batch, 1),
                                           ("ARCHIVE_MAX_RUNS_PER_PASS", max_runs, 0),
                                           ("RUNS_RETENTION_DAYS",
                                            settings.RUNS_RETENTION_DAYS, 0))
                if value < least]
    if problems:
        raise ImproperlyConfigured("; ".join(problems) + ". Nothing was archived.")


def archive_runs(*, actor: str, now: datetime | None = None, runs_per_file: int | None = None,
                 max_runs: int | None = None, remove_batch: int | None = None,
                 dry_run: bool = False, older_than_days: int | None = None) -> ArchiveReport:
    """One archiving pass, unless another one is running. `actor` says who (the command
    and its operating-system user, or the beat task and its worker); it is recorded with
    each file and each removal."""
    # The database's clock, as the runs' own times are: a host whose clock runs ahead would
    # take runs whose retention is not over, and date the files and removals wrongly.
    now = now or store.current().now()
    runs_per_file = runs_per_file or settings.ARCHIVE_RUNS_PER_FILE
    max_runs = settings.ARCHIVE_MAX_RUNS_PER_PASS if max_runs is None else max_runs
    remove_batch = remove_batch or settings.ARCHIVE_REMOVE_BATCH
    refuse_sizes(runs_per_file=runs_per_file, max_runs=max_runs, remove_batch=remove_batch)
    report = ArchiveReport(dry_run=dry_run)
    with single_pass(JOB) as mine:
        if not mine:
            report.locked_out = True
            return report
        if dry_run:
            ids = list(eligible(now, older_than_days).values_list("pk", flat=True)[:max_runs])
            for start in range(0, len(ids), runs_per_file):
                batch = ids[start:start + runs_per_file]
                report.eligible += len(batch) - len(parts.pending(batch))
            return report
        finish_unfinished(actor=actor, remove_batch=remove_batch, report=report)
        report.partial_files_removed = writing.remove_stale_partials(storage())
        after = None
        # Held runs are looked at too: at most as many as a pass archives, so that a
        # backlog of them (a receiver down for days) costs a pass a bounded read.
        while report.runs_written < max_runs and report.runs_held < max_runs:
            runs = eligible(now, older_than_days)
            if after is not None:
                # Keyset: runs kept in the hot tables are not taken again in this pass.
                runs = runs.filter(Q(updated_at__gt=after[0])
                                   | Q(updated_at=after[0], pk__gt=after[1]))
            batch = list(runs.values_list("updated_at", "pk")[
                :min(runs_per_file, max_runs - report.runs_written)])
            if not batch:
                break
            after = batch[-1]
            ids = sorted(pk for _, pk in batch)
            held = parts.pending(ids)
            report.runs_held += len(held)
            ids = [pk for pk in ids if pk not in held]
            if not ids:
                continue
            archive_file(ids, actor=actor, now=now, remove_batch=remove_batch, report=report)
    return report


def archive_file(run_ids: list[int], *, actor: str, now: datetime, remove_batch: int,
                 report: ArchiveReport) -> ArchiveFile | None:
    """One file of a pass: write the runs (at most ARCHIVE_RUNS_PER_FILE of them, the
    caller's bound), record the file, then remove them; counted in `report`. None when none
    of the runs exists any more. A storage that refuses the file raises OSError, with none
    of these runs removed."""
    archive = write_file(run_ids, actor=actor, now=now)
    if archive is None:
        return None
    report.files.append(archive.name)
    report.runs_written += archive.run_count
    report.bytes_written += archive.size
    remove(archive, actor=actor, remove_batch=remove_batch, report=report)
    return archive


def _repeatable_read():
    """A transaction whose reads all see one snapshot (runs.store)."""
    return store.current().snapshot()


def write_file(run_ids: list[int], *, actor: str, now: datetime) -> ArchiveFile | None:
    """Write the runs to a new archive file and record it; nothing is removed yet. None
    when none of the runs exists any more.

    Each app writes its own rows of the runs (archive.parts); each run's line carries its
    seal and the file ends with the file's seal (audit.seals), so that the file verifies
    on its own."""
    heads = {}
    finished = []
    records = 0
    with tempfile.TemporaryFile() as raw:
        # One snapshot for the whole file, so that it is one consistent picture of its
        # runs; within it the runs are read RUNS_PER_READ at a time, and each run's rows
        # are let go once its line is written.
        with _repeatable_read():
            ids = sorted(Run.objects.filter(pk__in=run_ids).values_list("pk", flat=True))
            if not ids:
                return None
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as out:
                def line(obj):
                    out.write(json.dumps(obj, default=to_json, ensure_ascii=False,
                                         separators=(",", ":")).encode())
                    out.write(b"\n")

                header = {"format": FORMAT, "created_at": now, "created_by": actor,
                          "runs": len(ids)}
                line({"archive": header})
                run_seals = []
                for start in range(0, len(ids), RUNS_PER_READ):
                    read = ids[start:start + RUNS_PER_READ]
                    found = parts.rows(read)
                    for run_id in read:
                        sections = found.pop(run_id)
                        seal = seals.seal_run(run_id, sections)
                        line({**sections, "seal": seal})
                        run_seals.append((run_id, seal["mac"]))
                        run = sections["run"]
                        # The head's seal travels in the run's row (audit_seal, under the
                        # run's seal), where the offline check verifies it. The heads
                        # recorded here stay [seq, hash], as those of the files recorded
                        # before heads were sealed.
                        heads[str(run_id)] = [run["audit_seq"], run["audit_head"]]
                        records += len(sections.get("audit", []))
                        if run["finished_at"]:
                            finished.append(run["finished_at"])
                line({"seal": seals.seal_file(json.loads(json.dumps(header, default=to_json)),
                                              run_seals)})
        size = raw.tell()
        raw.seek(0)
        digest = _sha256(raw)
        raw.seek(0)
        name = (f"runs/{now:%Y/%m/%d}/runs-{ids[0]}-{ids[-1]}-{now:%H%M%S}-"
                f"{digest[:12]}.jsonl.gz")
        where = storage()
        saved_here = not where.exists(name)
        try:
            if saved_here:
                # Under its name only once whole: a process killed while it writes leaves
                # a partial file, which the next pass deletes (archive.writing).
                name = writing.save_whole(where, name, writing.ArchiveBytes(raw, name=name))
                crashpoints.reach(crashpoints.SAVED, "archive_file")
            archive = ArchiveFile.objects.create(
                name=name, sha256=digest, size=size, run_count=len(ids),
                record_count=records, first_finished_at=min(finished, default=None),
                last_finished_at=max(finished, default=None), heads=heads, created_at=now,
                created_by=actor)
        except Exception:
            # No row names the file: no file without its row either, nor the part of one a
            # full disk cut short (its runs stay hot).
            if saved_here:
                writing.discard(where, name)
            raise
        if saved_here:
            writing.recorded(where, name)
        return archive


def _sha256(handle) -> str:
    digest = hashlib.sha256()
    while chunk := handle.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def remove(archive: ArchiveFile, *, actor: str, remove_batch: int,
           report: ArchiveReport) -> None:
    """Remove the file's runs that are still hot, a short transaction per batch."""
    pending = sorted(Run.objects.filter(pk__in=[int(k) for k in archive.heads])
                     .values_list("pk", flat=True))
    kept = list(archive.kept_run_ids)
    for start in range(0, len(pending), remove_batch):
        removed, changed, busy = remove_batch_unheld(archive, pending[start:start + remove_batch],
                                                     actor=actor)
        report.runs_removed += removed
        report.runs_kept += len(changed)
        report.runs_busy += len(busy)
        kept += changed + busy
    ArchiveFile.objects.filter(pk=archive.pk).update(removal_finished_at=store.current().now(),
                                                     kept_run_ids=kept)


def remove_batch_unheld(archive: ArchiveFile, run_ids: list[int], *,
                        actor: str) -> tuple[int, list[int], list[int]]:
    """_remove_batch, passing over a run whose rows another session holds.

    A held run row is skipped as it is locked; a held row of a run's own (a step, an
    approval request, a tool call locked FOR UPDATE by a psql prompt idle in its
    transaction) is met only by its DELETE, which waited for it without end, and the whole
    pass with it. That wait is bounded (DB_LOCK_TIMEOUT); past it the batch's transaction
    is rolled back whole (no run of it half removed) and its runs are tried one per
    transaction, so that only the run whose row is held is passed over: kept, as a held
    run is, and archived by a later pass."""
    try:
        with store.current().lock_wait_at_most(settings.DB_LOCK_TIMEOUT):
            return _remove_batch(archive, run_ids, actor=actor)
    except OperationalError as exc:
        if not would_not_wait(exc):
            raise
    if len(run_ids) == 1:
        return 0, [], list(run_ids)
    removed, changed, busy = 0, [], []
    for run_id in run_ids:
        one_removed, one_changed, one_busy = remove_batch_unheld(archive, [run_id],
                                                                 actor=actor)
        removed += one_removed
        changed += one_changed
        busy += one_busy
    return removed, changed, busy


def _remove_batch(archive: ArchiveFile, run_ids: list[int], *,
                  actor: str) -> tuple[int, list[int], list[int]]:
    """Remove the runs of `run_ids` the file holds as they are now; (how many were removed,
    the runs that changed since the file was written, the runs another session held)."""
    now = store.current().now()
    with transaction.atomic(durable=True):
        store.current().allow_archival_removal(archive.sha256)
        # A run another session holds (a psql prompt left idle in its transaction, an
        # operator's action under way) is passed over, not waited for: waiting stopped the
        # whole pass, every later run of it, for as long as the row was held. It is kept
        # as a changed run is (in the file, still hot) and the next pass archives it.
        runs = store.current().lock_runs(Run.objects.filter(pk__in=run_ids).order_by("pk")
                                         .only(*TOMBSTONE_FIELDS), skip_locked=True)
        locked = {run.pk for run in runs}
        busy = sorted(Run.objects.filter(pk__in=[pk for pk in run_ids if pk not in locked])
                      .values_list("pk", flat=True))
        removable, changed = [], []
        # Asked again under the runs' locks: a subscriber made active again since the file
        # was written has deliveries of them waiting.
        held = parts.pending([run.pk for run in runs])
        for run in runs:
            unchanged = ([run.audit_seq, run.audit_head] == archive.heads.get(str(run.pk))
                         and run.pk not in held)
            (removable if unchanged and run.status in FINAL_RUN_STATUSES else changed).append(run)
        if not removable:
            return 0, [r.pk for r in changed], busy
        ids = [r.pk for r in removable]
        ArchivedRun.objects.bulk_create([
            ArchivedRun(original_run_id=r.pk, workflow_id=r.workflow_id,
                        workflow_name=r.workflow_name, workflow_version=r.workflow_version,
                        business_key=r.business_key, input_hash=r.input_hash,
                        final_status=r.status, created_at=r.created_at,
                        finished_at=r.finished_at, archived_at=now, archive_file=archive)
            for r in removable])
        # The records the metrics' counters counted (runs.models.OF_REAL_WORK): a drill
        # run's were never counted, so its removal adds none back.
        audit_actions = dict(AuditRecord.objects.filter(OF_REAL_WORK, run_id__in=ids)
                             .values_list("action").annotate(n=Count("*")).order_by())
        # Each app removes its own rows of the runs (archive.parts); the audit app's
        # DELETE passes its trigger through the tombstones written just above.
        parts.remove(ids)
        ArchiveRemoval.objects.create(
            archive_file=archive, removed_at=now, actor=actor, run_count=len(ids),
            heads={str(r.pk): [r.audit_seq, r.audit_head] for r in removable},
            audit_actions=audit_actions)
    return len(ids), [r.pk for r in changed], busy


def finish_unfinished(*, actor: str, remove_batch: int, report: ArchiveReport) -> None:
    """Finish the removals a crashed pass left: its file is written and recorded."""
    for archive in ArchiveFile.objects.filter(removal_finished_at__isnull=True).order_by("pk"):
        remove(archive, actor=actor, remove_batch=remove_batch, report=report)
