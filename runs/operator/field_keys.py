"""Retiring a key of FIELD_ENCRYPTION_KEYS (rotated on schedule, or leaked): every stored
sensitive value sealed with another key than the one that seals now is sealed again with
it, so that the old key can leave the ring without leaving a run holding a value nothing
opens (its next turn or call would stop for a person). `manage.py reseal_fields` calls
reseal_fields, and with --count, key_counts: which keys the stored values still name.

A run's rows are sealed again in one transaction on the locked run, never while a worker
holds its lease (its checkpoint writes the rows it holds and the chain's next record): such runs
are left and counted, for a later pass. Each run changed gets one chained record
(fields_resealed) with the new digest of every result sealed again, since a sealed value
encrypts anew and so no longer matches the digest its outcome's record carries. An artifact
holding such a value is written anew (named by its content) and its row refers to the new
one; the old file, which the retired key opens, is removed once that transaction has
committed, unless a row still refers to it (a late result's record in the run's chain keeps
its file). Archive files keep their values as sealed at their time: they are never opened
(the archive shows them masked), so they do not hold an old key in the ring.
"""

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial

from django.db import transaction
from django.db.models import Q, TextField
from django.db.models.functions import Cast

from audit.access import AccessAction, record_access_change
from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord

from ..agent_models import AgentTurn, ToolCall
from ..machine import artifacts, sensitive
from ..machine.storable import person_text_problem
from ..machine.transitions.attempts import result_digest
from ..machine.transitions.kernel import TransitionNotAllowed, transition_on
from ..models import HELD_RUN_STATUSES, Run, Step

BATCH = 500

# The columns that may hold a sealed value, by model: a value in JSON (or text) that starts
# with sensitive.PREFIX, or an artifact whose content holds one.
SEALED_COLUMNS = {
    Step: ("result",),
    ToolCall: ("arguments", "result"),
    AgentTurn: ("tool_calls", "sealed_content", "transcript"),
}
RUN_OF = {Step: "run_id", ToolCall: "step__run_id", AgentTurn: "step__run_id"}

# Another app's stored sealed values (api: webhook subscribers' secrets): called with the
# function that gives each sealed value's replacement, it saves the rows whose values
# changed and returns how many.
SealedValues = Callable[[Callable[[str], str]], int]
_other_holders: dict[str, SealedValues] = {}


def register_sealed_values(name: str, walk: SealedValues) -> None:
    """Let reseal_fields and key_counts reach `name`'s sealed values (an app above runs)."""
    _other_holders[name] = walk


class ResealRefused(Exception):
    """Nothing was sealed again: the reason is empty or cannot be kept (the message says
    which, to follow the reason's name)."""


@dataclass
class KeyCounts:
    """What a walk over the stored sealed values found."""

    key_id: str  # the key that seals now
    by_key: Counter = field(default_factory=Counter)  # values found, by the key they name
    unreadable: Counter = field(default_factory=Counter)  # of those, values no key opens
    resealed: int = 0
    runs: int = 0  # runs with a value sealed again
    runs_held: list[int] = field(default_factory=list)  # left: a worker held them
    other_rows: dict[str, int] = field(default_factory=dict)  # rows changed, by holder
    unreadable_artifacts: list[str] = field(default_factory=list)
    files_removed: int = 0  # artifacts written anew: their old files removed
    files_left: list[str] = field(default_factory=list)  # old files the storage kept

    @property
    def left(self) -> Counter:
        """Values still sealed with another key than the one that seals now."""
        return Counter({k: n for k, n in self.by_key.items() if k != self.key_id})

    def counted(self, sealed: str) -> str:
        self.by_key[sensitive.key_of(sealed)] += 1
        return sealed

    def sealed_again(self, sealed: str) -> str:
        """`sealed` sealed with the key that seals now; as it is when it is sealed with that
        key already, or when no key held opens it (counted as unreadable)."""
        key_id = sensitive.key_of(sealed)
        if key_id == self.key_id:
            self.by_key[key_id] += 1
            return sealed
        try:
            value = sensitive.decrypt(sealed)
        except sensitive.UnreadableValue:
            self.by_key[key_id] += 1
            self.unreadable[key_id] += 1
            return sealed
        self.resealed += 1
        self.by_key[self.key_id] += 1
        return sensitive.encrypt(value)


def key_counts() -> KeyCounts:
    """How many stored sealed values name each key, nothing changed: a key no value names
    may leave FIELD_ENCRYPTION_KEYS."""
    counts = KeyCounts(key_id=sensitive.current_key())
    for run_id in runs_holding_sealed_values():
        count_run(run_id, counts)
    for walk in _other_holders.values():
        walk(counts.counted)
    return counts


def reseal_fields(*, reason: str, actor: Actor) -> KeyCounts:
    """Seal again, with the key that seals now, every stored sensitive value another key
    sealed (runs a worker holds left and counted), and keep `reason` in the access chain
    (fields_resealed). ResealRefused, with nothing sealed, for a reason that cannot be kept."""
    reason = reason.strip()
    if not reason:
        raise ResealRefused(" is empty: say why the values are sealed again")
    if (problem := person_text_problem(reason)) is not None:
        raise ResealRefused(f": {problem}; nothing was sealed")
    counts = KeyCounts(key_id=sensitive.current_key())
    for run_id in runs_holding_sealed_values():
        reseal_run(run_id, counts, reason=reason, actor=actor)
    for name, walk in _other_holders.items():
        counts.other_rows[name] = walk(counts.sealed_again)
    record_access_change(
        action=AccessAction.FIELDS_RESEALED, subject=f"FIELD_ENCRYPTION_KEYS {counts.key_id}",
        actor=actor, reason=reason, before={},
        after={"key_id": counts.key_id, "values": counts.resealed, "runs": counts.runs,
               "runs_held": len(counts.runs_held), "left": dict(counts.left),
               **{name: rows for name, rows in counts.other_rows.items()}})
    return counts


def reseal_run(run_id: int, counts: KeyCounts, *, reason: str, actor: Actor) -> None:
    """One run's sealed values sealed again, with its record, in one transaction on the
    locked run; left (and counted) while a worker holds it."""
    def held(run: Run) -> str | None:
        # A worker's checkpoint writes the rows it holds and the chain's next record. A run
        # between two tries (an undo's backoff) holds no lease: a claim that read it before
        # this change finds the chain moved on and claims nothing.
        return "held by a worker" if run.status in HELD_RUN_STATUSES and run.lease_owner \
            else None

    before = counts.resealed
    try:
        with transition_on(run_id, None, actor=actor, now=None, refused=held) as change:
            results = []
            written_over = set()
            for row, column, value in sealed_columns(run_id):
                kept = stored_with(run_id, value, counts.sealed_again, counts)
                if kept == value:
                    continue
                written_over |= artifacts.names(value) - artifacts.names(kept)
                setattr(row, column, kept)
                row.save(update_fields=[column])
                if column == "result":
                    results.append({**named(row), "result_sha256": result_digest(kept)})
            if counts.resealed > before:
                change.audit(AuditAction.FIELDS_RESEALED, reason=reason, data={
                    "key_id": counts.key_id, "values": counts.resealed - before,
                    "results": results})
            if written_over:
                # Not before the commit: rolled back, the rows still refer to the old files.
                transaction.on_commit(partial(remove_written_over, run_id, written_over,
                                              counts))
    except TransitionNotAllowed:
        if not Run.objects.filter(pk=run_id).exists():
            return  # archived meanwhile: its file keeps its values as they were sealed
        counts.runs_held.append(run_id)
        count_run(run_id, counts)  # as they are: the keys they name are still needed
        return
    if counts.resealed > before:
        counts.runs += 1


def remove_written_over(run_id: int, names: set[str], counts: KeyCounts) -> None:
    """Remove the files of the run's artifacts `names`: written anew, their rows refer to
    the new ones, and what the retired key sealed is left in these. Named by its content, a
    file may be another row's too: one a row still refers to is kept. A file the storage
    fails to remove is named in counts.files_left (the rows changed already: nothing refers
    to it)."""
    for name in sorted(names):
        if referred(run_id, name):
            continue
        try:
            artifacts.remove(name)
        except Exception as exc:  # any storage backend's failure: named, the pass goes on
            counts.files_left.append(f"{name} ({type(exc).__name__}: {exc})")
        else:
            counts.files_removed += 1


def referred(run_id: int, name: str) -> bool:
    """Whether a row of run `run_id` refers to its artifact `name` (the run's in its path, so
    no other run's does): a column that may hold a reference, or a record of its chain (a
    late result's keeps the reference it came with)."""
    for model, columns in SEALED_COLUMNS.items():
        if mentioning(model.objects.filter(**{RUN_OF[model]: run_id}), columns, name):
            return True
    return mentioning(AuditRecord.objects.filter(run_id=run_id), ("before", "after", "data"),
                      name)


def mentioning(rows, columns, text: str) -> bool:
    """Whether one of `rows` holds `text` in one of its `columns`, each read as text."""
    texts = {f"{column}_text": Cast(column, output_field=TextField()) for column in columns}
    found = Q()
    for name in texts:
        found |= Q(**{f"{name}__contains": text})
    return rows.annotate(**texts).filter(found).exists()


def count_run(run_id: int, counts: KeyCounts) -> None:
    for _, _, value in sealed_columns(run_id):
        stored_with(run_id, value, counts.counted, counts)


def named(row) -> dict:
    """How a record names the row whose result changed: the step, or the tool call."""
    if isinstance(row, ToolCall):
        return {"tool_call": row.ref, "tool": row.tool}
    return {"step": row.name}


def stored_with(run_id: int, value, replaced: Callable[[str], str], counts: KeyCounts):
    """`value` as a column keeps it, with each sealed value in it replaced: inside the
    artifacts it refers to too (written anew, by content, and referred to instead)."""
    if artifacts.is_artifact(value):
        return artifact_with(run_id, value, replaced, counts)
    if isinstance(value, dict) and isinstance(value.get(artifacts.PARTS), list):
        return {name: artifact_with(run_id, part, replaced, counts)
                if name in value[artifacts.PARTS] else sensitive.each_sealed(part, replaced)
                for name, part in value.items()}
    return sensitive.each_sealed(value, replaced)


def artifact_with(run_id: int, reference: dict, replaced: Callable[[str], str],
                  counts: KeyCounts) -> dict:
    try:
        content = json.loads(artifacts.read(reference))
    except artifacts.ArtifactUnreadable as exc:
        counts.unreadable_artifacts.append(str(exc))
        return reference
    kept = sensitive.each_sealed(content, replaced)
    if kept == content:
        return reference
    # The stem it was written under (runs/<run>/<stem>-<sha256 prefix>.json).
    stem = reference[artifacts.ARTIFACT].rsplit("/", 1)[-1].rsplit("-", 1)[0]
    return artifacts.write(run_id, stem, kept)


def runs_holding_sealed_values(*, batch: int = BATCH) -> Iterator[int]:
    """The ids of the runs with a row that may hold a sealed value, in order, read a batch
    of runs at a time (a maintenance pass over every run: each column read as text)."""
    after = 0
    while True:
        ids = list(Run.objects.filter(pk__gt=after).order_by("pk")
                   .values_list("pk", flat=True)[:batch])
        if not ids:
            return
        after = ids[-1]
        holding = set()
        for model in SEALED_COLUMNS:
            holding.update(rows_holding_sealed(model).filter(**{f"{RUN_OF[model]}__in": ids})
                           .values_list(RUN_OF[model], flat=True))
        yield from sorted(holding)


def sealed_columns(run_id: int) -> Iterator[tuple[object, str, object]]:
    """(row, column, value) of each of the run's columns that may hold a sealed value."""
    for model, columns in SEALED_COLUMNS.items():
        for row in rows_holding_sealed(model).filter(**{RUN_OF[model]: run_id}):
            for column in columns:
                value = getattr(row, column)
                if value not in (None, "", [], {}):
                    yield row, column, value


def rows_holding_sealed(model):
    """Rows of `model` a column of which may hold a sealed value: one with the prefix
    somewhere in its text, or an artifact's reference (its content may)."""
    columns = SEALED_COLUMNS[model]
    texts = {f"{column}_text": Cast(column, output_field=TextField()) for column in columns}
    found = Q()
    for name in texts:
        found |= Q(**{f"{name}__contains": sensitive.PREFIX})
        found |= Q(**{f"{name}__contains": artifacts.ARTIFACT})
    return model.objects.annotate(**texts).filter(found)
