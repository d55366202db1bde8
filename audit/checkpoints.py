"""Checkpoints of the chains' heads, kept outside the database: what a rollback cannot forge.

A head's seal (audit.head_seals) tells a chain rewritten by someone without the key, but not
a chain set back to an earlier head together with that head's genuine seal (kept from a
backup, or read before), nor a run's chain emptied with its head row. A checkpoint file,
written at a moment and kept where the database's writers cannot reach (another host, write-
once storage), tells both later: every (seq, hash) it names must still be in its chain.

The file is gzip-compressed JSON Lines: a header ("checkpoint"), one line per run chain
("run", "seq", "hash"), one for the access chain ("chain": "access"), and last an "end" line
with the count of chains, the sha256 of every line before it and a seal over both (the same
keyed seal as a head's, under the chain name CHECKPOINT_CHAIN): a file edited to leave a run
out, or to name an older head, no longer verifies.

A run archived since the checkpoint has left the hot tables: its chain is then judged by the
head its archive file closed (the archive app registers the lookup, register_archived_heads,
as it registers its catalogue in audit.offline). The file's records before that head are
verify_audit --archive's to check.

A run archived before the checkpoint is no longer a chain of the database, so the file names
instead every archive file the catalogue records ("archive", "sha256"; format 2): a database
set back to before a file was written (restored from an older backup) no longer records it,
and the check says so, where it would otherwise find every chain it names in place.
"""

import gzip
import hashlib
import json
import os
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.files import File
from django.core.files.storage import FileSystemStorage, Storage, storages
from django.db.models import Max
from django.db.models.functions import Coalesce, Now

from .access import access_head
from .chain import one_snapshot, recorded_heads
from .head_seals import head_seal_problem, seal_head
from .models import AccessChainHead, AccessRecord, AuditRecord, StoredCheckpoint
from .quoting import file_name

FORMAT = 2
# Format 1 files (written before they named archive files) are still read.
FORMATS_READ = (1, 2)
CHECKPOINT_CHAIN = "checkpoint"
# Chains looked up in one query when a checkpoint is checked.
BATCH = 2000
# Problems listed in a report: past this, the count says how many more.
PROBLEMS_LISTED = 50

# run ids -> {run id: (seq, hash)} of the heads their archive files closed; set by the
# archive app.
_archived_heads: Callable[[list[int]], dict[int, tuple[int, str]]] | None = None


def register_archived_heads(lookup: Callable[[list[int]], dict[int, tuple[int, str]]]) -> None:
    """Let a checkpoint's check judge a run that left the hot tables by its archived head."""
    global _archived_heads
    _archived_heads = lookup


# () -> (name, sha256) of every archive file the catalogue records; [names] -> {name: sha256}
# of those it records. Set by the archive app.
_archive_files: tuple[Callable[[], Iterator[tuple[str, str]]],
                      Callable[[list[str]], dict[str, str]]] | None = None


def register_archive_files(listing: Callable[[], Iterator[tuple[str, str]]],
                           recorded: Callable[[list[str]], dict[str, str]]) -> None:
    """Let a checkpoint name every archive file recorded, and its check find one the
    database no longer records (set back to before it was written)."""
    global _archive_files
    _archive_files = listing, recorded


class CheckpointError(Exception):
    """The file cannot be written, read or trusted; the message says why."""


@dataclass
class CheckpointReport:
    taken_at: str = ""
    chains: int = 0
    archived: int = 0
    # Archive files the checkpoint names (each still recorded, unless a problem says not).
    files: int = 0
    problems: list[str] = field(default_factory=list)
    problem_count: int = 0

    def add(self, problem: str) -> None:
        self.problem_count += 1
        if len(self.problems) < PROBLEMS_LISTED:
            self.problems.append(problem)


def write_checkpoint(path: Path) -> int:
    """Write the head of every chain, as of one moment, to a new file at `path`; returns the
    chains written. Refuses a path that exists; the file appears whole or not at all."""
    path = Path(path)
    shown = file_name(path)
    try:
        exists, in_a_directory = path.exists(), path.parent.is_dir()
    except OSError as exc:  # a name the file system cannot take (too long)
        raise CheckpointError(f"{shown} cannot be written: {exc.strerror or exc}") from None
    if exists:
        raise CheckpointError(f"{shown} exists: a checkpoint is never written over another")
    if not in_a_directory:
        raise CheckpointError(f"{file_name(path.parent)} is no directory")
    try:
        descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:  # a directory that takes no new file: read-only, not ours
        raise CheckpointError(f"{shown} cannot be written: {exc.strerror or exc}") from None
    try:
        with os.fdopen(descriptor, "wb") as raw, gzip.open(raw, "wb") as out:
            chains, _taken_at = _write_lines(out)
        # link, not rename: a checkpoint written meanwhile under the same name is kept.
        os.link(temporary, path)
    except FileExistsError:
        raise CheckpointError(f"{shown} exists: a checkpoint is never written over another")\
            from None
    except OSError as exc:
        raise CheckpointError(f"{shown} cannot be written: {exc.strerror or exc}") from None
    finally:
        Path(temporary).unlink(missing_ok=True)
    return chains


def storage() -> Storage:
    """The storage named "audit_checkpoints" in STORAGES when there is one (any
    django-storages backend: a bucket the application may add to but not change, ideally),
    else the file system under VAR_DIR/audit-checkpoints."""
    if "audit_checkpoints" in settings.STORAGES:
        return storages["audit_checkpoints"]
    return FileSystemStorage(location=Path(settings.VAR_DIR) / "audit-checkpoints")


STORED_PREFIX, STORED_SUFFIX = "audit-heads-", ".jsonl.gz"


def store_checkpoint() -> tuple[str, int]:
    """Write a checkpoint into the checkpoint storage (beat does, every
    AUDIT_CHECKPOINT_INTERVAL_SECONDS), under a new name that sorts by the time it was taken;
    returns (its name, the chains written)."""
    with tempfile.TemporaryFile() as raw:
        with gzip.open(raw, "wb") as out:
            chains, taken_at = _write_lines(out)
        raw.seek(0)
        name = storage().save(f"{STORED_PREFIX}{taken_at:%Y%m%dT%H%M%S%fZ}{STORED_SUFFIX}",
                              File(raw))
    # After the file: a row names only a checkpoint that was stored.
    StoredCheckpoint.objects.create(name=name, taken_at=taken_at, chains=chains)
    return name, chains


def last_taken_at():
    """When the heads of the newest stored checkpoint were read, or None if none was."""
    return StoredCheckpoint.objects.aggregate(at=Max("taken_at"))["at"]


def latest_stored() -> str | None:
    """The name of the newest checkpoint in the checkpoint storage, or None."""
    try:
        _dirs, names = storage().listdir("")
    except FileNotFoundError:
        return None
    stored = [n for n in names if n.startswith(STORED_PREFIX) and n.endswith(STORED_SUFFIX)]
    return max(stored, default=None)


def _write_lines(out) -> tuple[int, datetime]:
    digest, chains = hashlib.sha256(), 0

    def put(line: dict) -> None:
        data = (json.dumps(line, sort_keys=True, separators=(",", ":")) + "\n").encode()
        digest.update(data)
        out.write(data)

    with one_snapshot():
        taken_at = _database_now()
        put({"checkpoint": "audit-heads", "format": FORMAT, "taken_at": taken_at.isoformat()})
        heads = recorded_heads()
        for run_id, seq, head_hash, _seal in heads if heads is not None else ():
            # A run with no head has no record a later check could look for; verify_audit
            # names it (every run is started with its first record).
            if seq:
                put({"run": run_id, "seq": seq, "hash": head_hash})
                chains += 1
        seq, head_hash, _seal = access_head()
        if seq:
            put({"chain": "access", "seq": seq, "hash": head_hash})
            chains += 1
        files = 0
        for name, file_sha256 in _archive_files[0]() if _archive_files is not None else ():
            put({"archive": name, "sha256": file_sha256})
            files += 1
    sha256 = digest.hexdigest()
    # The seal covers the count of chains and the digest of every line, the files' included.
    out.write((json.dumps({"end": {"chains": chains, "archives": files, "sha256": sha256,
                                   "seal": seal_head(CHECKPOINT_CHAIN, chains, sha256)}},
                          sort_keys=True) + "\n").encode())
    return chains, taken_at


def _database_now() -> datetime:
    # The database's clock, as every record's: the host writing the file may be off. Django's
    # Now() is that clock on PostgreSQL and on the demo's SQLite alike; an aggregate gives one
    # row whether or not the access chain has a head row yet.
    return AccessChainHead.objects.filter(pk=1).aggregate(
        now=Coalesce(Max(Now()), Now()))["now"]


def check_checkpoint(path: Path | None = None, *, stored: str | None = None
                     ) -> CheckpointReport:
    """Whether every chain head the file at `path` names is still in its chain (or closed by
    an archive file at or past it). Raises CheckpointError when the file cannot be read or
    was changed; chains that no longer hold their checkpointed head are the report's
    problems. The file is read twice, its seal checked before any line is trusted: a
    million runs' heads are never held in memory at once. `stored`: a name in the checkpoint
    storage instead of a local path."""
    if stored is not None:
        label, opener = file_name(stored), lambda: storage().open(stored, "rb")
    else:
        label, opener = file_name(path), lambda: open(path, "rb")
    report = CheckpointReport()
    for _ in _entries(opener, label, report):
        pass
    with one_snapshot():
        batch = []
        for entry in _entries(opener, label, report):
            batch.append(entry)
            if len(batch) == BATCH:
                _check_batch(batch, report)
                batch = []
        if batch:
            _check_batch(batch, report)
    return report


def _entries(opener, shown, report: CheckpointReport) -> Iterator[dict]:
    """The chain heads of the file `opener()` opens (`shown` names it, as file_name writes
    it), then (once all are read) a CheckpointError if its end line does not vouch for
    them."""
    digest, count, files, end = hashlib.sha256(), 0, 0, None
    try:
        with opener() as raw, gzip.open(raw, "rb") as lines:
            for number, data in enumerate(lines, start=1):
                line = _parsed(data, number, shown)
                if end is not None:
                    raise CheckpointError(f"{shown}: line {number} follows the end line")
                if "end" in line:
                    end = line["end"]
                    continue
                digest.update(data)
                if number == 1:
                    if (line.get("checkpoint") != "audit-heads"
                            or line.get("format") not in FORMATS_READ):
                        raise CheckpointError(f"{shown} is no audit heads checkpoint (format "
                                              f"{' or '.join(map(str, FORMATS_READ))})")
                    report.taken_at = str(line.get("taken_at", ""))
                    continue
                entry = _entry(line, number, shown)
                if "archive" in entry:
                    files += 1
                else:
                    count += 1
                yield entry
    except FileNotFoundError:
        raise CheckpointError(f"{shown} does not exist") from None
    except (OSError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        # Not str(exc) where it is an OSError's: that repeats the whole path, which `shown`
        # cuts.
        why = getattr(exc, "strerror", None) or exc
        raise CheckpointError(f"{shown} cannot be read: {why}") from None
    if end is None or not isinstance(end, dict):
        raise CheckpointError(f"{shown} has no end line: the file was cut short")
    sha256, chains = digest.hexdigest(), end.get("chains")
    if end.get("sha256") != sha256 or chains != count or end.get("archives", 0) != files:
        raise CheckpointError(f"{shown} was changed after it was written: its lines do not "
                              "match its end line")
    problem = head_seal_problem(CHECKPOINT_CHAIN, chains, sha256, end.get("seal"))
    if problem is not None:
        raise CheckpointError(f"{shown}: {problem.replace('head', 'checkpoint')}")
    report.chains, report.files = chains, files


def _parsed(data: bytes, number: int, shown: str) -> dict:
    try:
        line = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise CheckpointError(f"{shown}: line {number} is not JSON") from None
    except RecursionError:  # arrays within arrays past the decoder's depth: no line of ours
        raise CheckpointError(f"{shown}: line {number} is nested too deep") from None
    if not isinstance(line, dict):
        raise CheckpointError(f"{shown}: line {number} is not an object")
    return line


def _entry(line: dict, number: int, shown: str) -> dict:
    if "archive" in line:
        name, file_sha256 = line["archive"], line.get("sha256")
        if not (isinstance(name, str) and isinstance(file_sha256, str)):
            raise CheckpointError(f"{shown}: line {number} names no archive file")
        return {"archive": name, "sha256": file_sha256}
    seq, head_hash = line.get("seq"), line.get("hash")
    chain = line.get("run", line.get("chain"))
    if not (isinstance(seq, int) and isinstance(head_hash, str)
            and (chain == "access" or isinstance(chain, int))):
        raise CheckpointError(f"{shown}: line {number} names no chain head")
    return {"chain": chain, "seq": seq, "hash": head_hash}


def _check_batch(batch: list[dict], report: CheckpointReport) -> None:
    _check_files([e for e in batch if "archive" in e], report)
    batch = [e for e in batch if "archive" not in e]
    runs = {e["chain"]: e for e in batch if e["chain"] != "access"}
    held = {run_id: record_hash for run_id, seq, record_hash in AuditRecord.objects.filter(
        run_id__in=list(runs), seq__in={e["seq"] for e in runs.values()},
    ).values_list("run_id", "seq", "hash") if runs[run_id]["seq"] == seq}
    missing = [run_id for run_id in runs if run_id not in held]
    archived = _archived_heads(missing) if missing and _archived_heads is not None else {}
    for run_id, entry in runs.items():
        if run_id in held:
            _compare(f"run {run_id}", entry, held[run_id], report)
        elif run_id in archived:
            report.archived += 1
            _compare_archived(run_id, entry, archived[run_id], report)
        else:
            report.add(f"run {run_id}: its chain no longer holds record seq={entry['seq']} "
                       f"(hash {entry['hash'][:12]}), and no archive file closed it: the "
                       "chain was set back or emptied, or the run removed outside the archive")
    for entry in (e for e in batch if e["chain"] == "access"):
        record_hash = AccessRecord.objects.filter(seq=entry["seq"]).values_list(
            "hash", flat=True).first()
        if record_hash is None:
            report.add(f"the access chain no longer holds record seq={entry['seq']} (hash "
                       f"{entry['hash'][:12]}): it was set back or emptied")
        else:
            _compare("the access chain", entry, record_hash, report)


def _check_files(files: list[dict], report: CheckpointReport) -> None:
    if not files:
        return
    recorded = _archive_files[1]([e["archive"] for e in files]) if _archive_files else {}
    for entry in files:
        name, file_sha256 = entry["archive"], recorded.get(entry["archive"])
        if file_sha256 is None:
            report.add(f"archive file {file_name(name)}: this database has no record of it: "
                       "the database was set back to before it was written (restored from an "
                       "older backup?), or its record removed")
        elif file_sha256 != entry["sha256"]:
            report.add(f"archive file {file_name(name)}: recorded with sha256 "
                       f"{file_sha256[:12]} where the checkpoint has {entry['sha256'][:12]}: "
                       "its record was changed")


def _compare(chain: str, entry: dict, record_hash: str, report: CheckpointReport) -> None:
    if record_hash != entry["hash"]:
        report.add(f"{chain}: record seq={entry['seq']} has hash {record_hash[:12]} where the "
                   f"checkpoint has {entry['hash'][:12]}: the chain was rewritten since")


def _compare_archived(run_id: int, entry: dict, head: tuple[int, str],
                      report: CheckpointReport) -> None:
    seq, head_hash = head
    if seq < entry["seq"]:
        report.add(f"run {run_id}: its archive file closed its chain at seq={seq}, before the "
                   f"checkpoint's seq={entry['seq']}: the chain was set back before it was "
                   "archived")
    elif seq == entry["seq"] and head_hash != entry["hash"]:
        report.add(f"run {run_id}: its archive file closed its chain at seq={seq} with hash "
                   f"{head_hash[:12]} where the checkpoint has {entry['hash'][:12]}: the chain "
                   "was rewritten before it was archived")
