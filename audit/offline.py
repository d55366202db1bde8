"""Audit chains outside the database: records as JSON, and the offline check of an archive.

The archive app moves finished runs out of the hot tables into gzip-compressed JSON Lines
files. The audit app owns how its records are written there and how their chains are
checked, so that `manage.py verify_audit --archive FILE` needs nothing but the file (and
this code): each record is rebuilt as an unsaved AuditRecord and checked with the same
hashing as the live chains (audit.chain.chain_break).

What this module relies on in an archive file: one JSON object per line; a header line
("archive"); a line per run with "run" (the run's row, with "id", "audit_seq" and
"audit_head": the head of its chain as the run row kept it, and, in files written since
heads are sealed, "audit_seal": its seal, audit.head_seals), "audit" (its records, as
record_to_dict writes them, in sequence order), the run's other parts, and "seal" (see
audit.seals); last, the file's own "seal".

The file's own facts (its sha256, and the chain heads recorded when it was written) live
in the archive app's tables. Audit imports nothing from above it: the archive app registers
a lookup (register_catalogue) that verify_audit asks when it is installed, as each app
registers its own metrics collector.
"""

import gzip
import hashlib
import io
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.db import models

from . import seals
from .chain import CONTENT_FIELDS, chain_break
from .head_seals import head_seal_problem
from .models import AuditRecord
from .quoting import file_name

_FIELDS = [f for f in AuditRecord._meta.concrete_fields]
_DATETIMES = {f.attname for f in _FIELDS if isinstance(f, models.DateTimeField)}


def to_json(value):
    """`default` for json.dumps: datetimes in full (isoformat keeps the microseconds the
    chain's hashes cover; DjangoJSONEncoder would cut them to milliseconds)."""
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def record_to_dict(record: AuditRecord) -> dict:
    """Every stored field of a record, by column name (run_id, not run)."""
    return {f.attname: getattr(record, f.attname) for f in _FIELDS}


def record_from_dict(data: dict) -> AuditRecord:
    """An unsaved record with exactly the values record_to_dict wrote."""
    values = {}
    for name, value in data.items():
        if name in _DATETIMES and isinstance(value, str):
            value = datetime.fromisoformat(value)
        values[name] = value
    return AuditRecord(**values)


def chain_problem(run_id, records: list[AuditRecord], head_seq: int | None,
                  head_hash: str | None) -> str | None:
    """Why the chain of run `run_id` does not verify, naming the record, or None."""
    broken = chain_break(records)
    if broken is not None:
        record, why = broken
        return (f"audit chain of run {run_id} is broken at seq={record.seq} "
                f"action={record.action}: {why}")
    last_seq, last_hash = (records[-1].seq, records[-1].hash) if records else (0, "")
    if head_seq is not None and (last_seq != head_seq or last_hash != (head_hash or "")):
        return (f"audit chain of run {run_id} ends at seq={last_seq} but its recorded head "
                f"is seq={head_seq} hash={(head_hash or '')[:12]}...: records are missing "
                "or were replaced")
    return None


@dataclass(frozen=True)
class RecordedArchive:
    """What the database recorded about an archive file when it was written."""

    name: str
    sha256: str
    size: int
    heads: dict  # run id (a string) -> [seq, hash]
    # Another recorded file whose sha256 the file has: its content was replaced by that one's.
    same_content_as: str | None = None


# name -> RecordedArchive | None, set by the archive app (see the module docstring).
_catalogue: Callable[[str, str], RecordedArchive | None] | None = None


def register_catalogue(lookup: Callable[[str, str], RecordedArchive | None]) -> None:
    """Let verify_audit find what was recorded about a file: lookup(name, sha256)."""
    global _catalogue
    _catalogue = lookup


def recorded_archive(name: str, sha256: str) -> RecordedArchive | None:
    return _catalogue(name, sha256) if _catalogue is not None else None


@dataclass
class ArchiveCheck:
    sha256: str = ""
    size: int = 0
    runs: int = 0
    records: int = 0
    heads: dict = field(default_factory=dict)  # run id (a string) -> [seq, hash]
    problems: list[str] = field(default_factory=list)
    # Runs (ids as strings) whose rows are not as an archive writes them: named among the
    # problems, their chains not read.
    unread: set[str] = field(default_factory=set)
    # Written before archives were sealed (format 1): it verifies only against the record
    # of its sha256 in the database.
    unsealed: bool = False


class _Hashing(io.RawIOBase):
    """Reads through to `raw`, hashing and counting every byte on the way."""

    def __init__(self, raw):
        self.raw, self.digest, self.size = raw, hashlib.sha256(), 0

    def readable(self):
        return True

    def readinto(self, buffer):
        chunk = self.raw.read(len(buffer))
        n = len(chunk)
        buffer[:n] = chunk
        self.digest.update(chunk)
        self.size += n
        return n


def archive_lines(handle) -> Iterator[dict]:
    """The JSON objects of a gzip JSON Lines file opened in binary mode."""
    with gzip.open(handle, "rt", encoding="utf-8") as text:
        for number, line in enumerate(text, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ValueError(f"line {number} is not JSON: {exc}") from None


# How a line that is not an object is named to the person reading the report.
JSON_KINDS = {list: "array", str: "string", int: "number", float: "number", bool: "boolean",
              type(None): "null"}

# The fields of a run's row that the check reads, with the JSON types an archive writes
# them as (audit_seal: null for a head never sealed; rows written before heads were sealed
# have no such field).
RUN_FIELDS = {"id": (int,), "audit_seq": (int,), "audit_head": (str,),
              "audit_seal": (str, type(None))}


def _record_types(field) -> tuple[tuple[type, ...] | None, str]:
    # What an audit record's field holds in the file (record_to_dict, to_json); None: any
    # JSON value.
    if isinstance(field, models.DateTimeField):
        return (str,), "a time in ISO 8601 form"
    if isinstance(field, models.IntegerField) or field.is_relation:
        return ((int, type(None)) if field.null else (int,)), "an integer"
    if isinstance(field, models.JSONField):
        return None, "JSON"
    return ((str, type(None)) if field.null else (str,)), "text"


_RECORD_TYPES = {f.attname: _record_types(f) for f in _FIELDS}
# What a record's link in its chain is computed from (audit.chain.chain_break).
_CHAINED = {*CONTENT_FIELDS, "prev_hash", "hash"}


def _json_kind(value) -> str:
    return "an object" if isinstance(value, dict) else \
        f"a JSON {JSON_KINDS.get(type(value), 'value')}"


def _shown(value) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else f"{text[:40]}…"


def _wrong(value, types: tuple[type, ...] | None) -> bool:
    if types is None:
        return False
    # A JSON true or false is no integer, though Python's bool is one.
    return (isinstance(value, bool) and bool not in types) or not isinstance(value, types)


def run_row_problem(line: dict) -> str | None:
    """What in a run's line of an archive file is not as an archive writes it, naming the
    field (and the item of a part), or None: its run an object whose id and chain head
    have the types written, every other part an array of objects, its seal an object, and
    each audit record with a record's fields, of their types, its time in ISO 8601 form.
    Asked before the line is read, by the offline check and by the reading of an archived
    run (archive.reading) alike, so that a row edited by hand is named, not met as an
    exception halfway through it."""
    run = line.get("run")
    if not isinstance(run, dict):
        return f"field 'run' is {_json_kind(run)}, not an object"
    if "id" not in run:
        return "field 'run.id' is missing"
    for name, types in RUN_FIELDS.items():
        if name in run and _wrong(run[name], types):
            return (f"field 'run.{name}' is {_shown(run[name])}, not "
                    f"{'an integer' if types[0] is int else 'text'}")
    if "seal" in line and not isinstance(line["seal"], dict):
        return f"field 'seal' is {_json_kind(line['seal'])}, not an object"
    for part, rows in line.items():
        if part in ("run", "seal"):
            continue
        if not isinstance(rows, list):
            return f"field {part!r} is {_json_kind(rows)}, not an array"
        for number, row in enumerate(rows, start=1):
            if not isinstance(row, dict):
                return f"item {number} of field {part!r} is {_json_kind(row)}, not an object"
    for number, record in enumerate(line.get("audit", []), start=1):
        if (problem := _record_problem(record)) is not None:
            return f"audit record {number} (seq {_shown(record.get('seq'))}): {problem}"
    return None


def _record_problem(record: dict) -> str | None:
    unknown = sorted(record.keys() - _RECORD_TYPES.keys())
    if unknown:
        return f"field {unknown[0]!r} is not a field of an audit record"
    for name, (types, words) in _RECORD_TYPES.items():
        if name not in record:
            if name in _CHAINED:
                return f"field {name!r} is missing"
            continue  # a column an older file's records may not have: its default stands
        value = record[name]
        if _wrong(value, types):
            return f"field {name!r} is {_shown(value)}, not {words}"
        if name in _DATETIMES:
            try:
                datetime.fromisoformat(value)
            except ValueError:
                return f"field {name!r} is {_shown(value)}, not {words}"
    return None


def check_archive(handle) -> ArchiveCheck:
    """Verify an archive file (binary handle) from the file and the signing keys alone:
    each run's seal (every part of the run as sealed, with a key this installation holds),
    each record's hash, the sequence, the chain's end against the head the run row kept
    and that head's seal (when the row carries one), and the file's seal (no run removed,
    added or reordered, the file not cut short).
    Returns the file's sha256 and size as read, and the heads it found."""
    hashing = _Hashing(handle)
    report = ArchiveCheck()
    header = file_seal = None
    run_seals: list[tuple[int, str]] = []
    try:
        for number, line in enumerate(archive_lines(io.BufferedReader(hashing)), start=1):
            if not isinstance(line, dict):
                report.problems.append(f"line {number} of the archive is "
                                       f"{_json_kind(line)}, not an object: no archive "
                                       "writes one")
                continue
            run = line.get("run")
            if run is None:
                if "archive" in line and header is None and not run_seals:
                    header = line["archive"]
                    report.unsealed = header.get("format") == 1
                elif "seal" in line and file_seal is None:
                    file_seal = line["seal"]
                else:
                    report.problems.append("the file holds a line that is neither its "
                                           "header, a run nor its seal, or one out of place")
                continue
            problem = run_row_problem(line)
            run_id = run.get("id") if isinstance(run, dict) else None
            if problem is not None:
                readable = not _wrong(run_id, (int,))
                report.problems.append(
                    f"line {number} ({f'run {run_id}' if readable else 'a run'}): its row is "
                    f"not one an archive writes: {problem}")
                if not readable:
                    continue  # nothing else of it can be told apart
            if file_seal is not None:
                report.problems.append(f"run {run_id} comes after the file's seal")
            sections = {k: v for k, v in line.items() if k != "seal"}
            seal = line.get("seal")
            if not report.unsealed:
                report.problems += seals.run_problems(run_id, sections, seal)
            run_seals.append((run_id, str(seal.get("mac", "")) if isinstance(seal, dict)
                              else ""))
            if problem is not None:
                report.unread.add(str(run_id))
                continue  # its seal is checked; its chain cannot be read as written
            records = [record_from_dict(r) for r in line.get("audit", [])]
            problem = chain_problem(run_id, records, run.get("audit_seq"),
                                    run.get("audit_head"))
            if problem:
                report.problems.append(problem)
            elif "audit_seal" in run and run.get("audit_seq"):
                # The run row as written carries its head's seal (files written since heads
                # are sealed; an older file's rows have no such column, and its own seal
                # vouches for them). Removing the column from a row changes what the run's
                # seal covers, so it cannot be dropped to pass.
                unsealed = head_seal_problem(run_id, run["audit_seq"],
                                             run.get("audit_head", ""), run["audit_seal"])
                if unsealed:
                    report.problems.append(f"run {run_id}: {unsealed}")
            report.runs += 1
            report.records += len(records)
            if records:
                report.heads[str(run_id)] = [records[-1].seq, records[-1].hash]
        if not report.unsealed:
            report.problems += seals.file_problems(header, run_seals, file_seal)
    except (OSError, EOFError, ValueError, KeyError, TypeError, AttributeError,
            RecursionError, zlib.error) as exc:
        # RecursionError: JSON nested deeper than the decoder goes, which no archive writes.
        # zlib.error: a damaged compressed stream (a changed byte), not an OSError to gzip.
        report.problems.append(f"the archive cannot be read: {exc}")
    # Hash what gzip did not need to read (nothing, for a well-formed file).
    while hashing.read(1 << 16):
        pass
    report.sha256, report.size = hashing.digest.hexdigest(), hashing.size
    return report


def compare_with_recorded(report: ArchiveCheck, recorded: RecordedArchive) -> list[str]:
    """Differences between a file as read and what was recorded when it was written."""
    problems = []
    if recorded.same_content_as is not None:
        name = file_name(recorded.name)
        problems.append(f"the file holds the content of another archive file, "
                        f"{file_name(recorded.same_content_as)} (sha256 "
                        f"{report.sha256[:12]}...), not that of {name} (recorded sha256 "
                        f"{recorded.sha256[:12]}...): it was replaced by that file, and the "
                        f"runs of {name} are not in it")
    elif report.sha256 != recorded.sha256 or report.size != recorded.size:
        problems.append(f"the file's sha256 {report.sha256[:12]}... ({report.size} bytes) is "
                        f"not the recorded {recorded.sha256[:12]}... ({recorded.size} bytes)")
    for run_id, head in sorted(recorded.heads.items(), key=lambda item: int(item[0])):
        found = report.heads.get(run_id)
        if found is None and run_id in report.unread:
            continue  # in the file, its row named as unreadable
        if found is None:
            problems.append(f"run {run_id} is recorded in the archive but missing from it")
        elif list(found) != list(head):
            problems.append(f"audit chain of run {run_id} ends at seq={found[0]}, not at the "
                            f"recorded head seq={head[0]} hash={head[1][:12]}...")
    for run_id in report.heads.keys() - recorded.heads.keys():
        problems.append(f"run {run_id} is in the file but not recorded in its archive")
    return problems
