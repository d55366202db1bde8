"""Reading archives: the storage they live in, a run back from its file, and what was
recorded about a file (for verify_audit --archive, see audit.offline)."""

import json
import zlib
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.core.files.storage import FileSystemStorage, Storage, storages

from audit import seals
from audit.models import AuditRecord
from audit.offline import (
    RecordedArchive,
    archive_lines,
    chain_problem,
    record_from_dict,
    run_row_problem,
)
from audit.quoting import file_name

from .models import ArchiveFile


def storage() -> Storage:
    """The storage named "archive" in STORAGES when there is one (any django-storages
    backend), else the file system under VAR_DIR/archive."""
    if "archive" in settings.STORAGES:
        return storages["archive"]
    return FileSystemStorage(location=Path(settings.VAR_DIR) / "archive")


def recorded_archive(name: str, sha256: str) -> RecordedArchive | None:
    """What was recorded about the file named `name` when it was written: found by its name
    in the archive storage, else by its base name (a copy kept elsewhere under its name),
    else, for a copy under a name no file had, by its content's sha256.

    The name comes first: a file is judged against its own record, so that one whose content
    was replaced by another genuine archive file's (whose sha256 has a record of its own)
    fails against the runs and heads it should hold; `same_content_as` then names the file
    whose content it holds."""
    archive = (ArchiveFile.objects.filter(name=name).first()
               or ArchiveFile.objects.filter(name__endswith=f"/{Path(name).name}").first())
    if archive is None:
        archive = ArchiveFile.objects.filter(sha256=sha256).first()
        if archive is None:
            return None
    same_content_as = None
    if archive.sha256 != sha256:
        same_content_as = (ArchiveFile.objects.filter(sha256=sha256)
                           .values_list("name", flat=True).first())
    return RecordedArchive(name=archive.name, sha256=archive.sha256, size=archive.size,
                           heads=archive.heads, same_content_as=same_content_as)


def _dates(row: dict) -> dict:
    """Timestamps (the fields named *_at) as datetimes, for display."""
    out = dict(row)
    for key, value in row.items():
        if key.endswith("_at") and isinstance(value, str):
            try:
                out[key] = datetime.fromisoformat(value)
            except ValueError:
                pass
    return out


@dataclass
class ArchivedRunDetail:
    """A run as its archive file holds it: plain rows, read only."""

    run: dict
    steps: list[dict] = field(default_factory=list)
    events: list[dict] = field(default_factory=list)
    audit: list[AuditRecord] = field(default_factory=list)
    approvals: list[dict] = field(default_factory=list)
    notifications: list[dict] = field(default_factory=list)
    # Agent steps' tool calls, as the file holds them (step_id, turn, index, tool, status...).
    tool_calls: list[dict] = field(default_factory=list)
    # Why the run does not verify: against its seal, or its audit chain against the head
    # recorded for the file.
    chain_problem: str | None = None


class ArchiveUnreadable(Exception):
    """The run's archive file is missing from storage or does not hold the run."""


def read_archived_run(tombstone) -> ArchivedRunDetail:
    """The run of a tombstone (runs.models.ArchivedRun), read from its archive file, its
    audit chain verified against the head recorded when the file was written."""
    archive = tombstone.archive_file
    wanted = tombstone.original_run_id
    shown = file_name(archive.name)
    try:
        with storage().open(archive.name, "rb") as handle:
            number, line = next(((number, line) for number, line
                                 in enumerate(archive_lines(handle), start=1)
                                 if _run_id(line) == wanted), (None, None))
    except (OSError, EOFError, ValueError, zlib.error) as exc:
        # zlib.error: a damaged compressed stream (a byte changed in storage), which gzip
        # does not report as an OSError.
        raise ArchiveUnreadable(f"archive file {shown} cannot be read: {exc}") from exc
    if line is None:
        raise ArchiveUnreadable(f"archive file {shown} does not hold run {wanted}")
    # The file is read as it is, edited or not: its seal is checked once the run is read,
    # and a row no archive writes cannot be read that far. What is wrong is named as
    # verify_audit --archive names it.
    unreadable = (f"archive file {shown}, line {number}: the row of run {wanted} is not one "
                  "an archive writes")
    if (problem := run_row_problem(line)) is not None:
        raise ArchiveUnreadable(f"{unreadable}: {problem}")
    try:
        return _detail(archive, wanted, line)
    except (TypeError, ValueError, AttributeError, KeyError) as exc:
        raise ArchiveUnreadable(f"{unreadable} ({type(exc).__name__}: {exc})") from exc


def _run_id(line) -> object:
    """The id of the run a line of an archive file holds, if it holds one."""
    run = line.get("run") if isinstance(line, dict) else None
    return run.get("id") if isinstance(run, dict) else None


def _detail(archive, wanted: int, line: dict) -> ArchivedRunDetail:
    records = [record_from_dict(r) for r in line.get("audit", [])]
    head = archive.heads.get(str(wanted)) or [None, None]
    return ArchivedRunDetail(
        run=_dates(line["run"]), steps=[_dates(s) for s in line.get("steps", [])],
        events=[_dates(e) for e in line.get("events", [])], audit=records,
        approvals=[_dates(a) for a in line.get("approvals", [])],
        notifications=[_dates(n) for n in line.get("notifications", [])],
        tool_calls=line.get("tool_calls", []),
        chain_problem="; ".join(filter(None, [
            *seals.run_problems(wanted, {k: v for k, v in line.items() if k != "seal"},
                                line.get("seal")),
            chain_problem(wanted, records, head[0], head[1])])) or None)


def pretty(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)
