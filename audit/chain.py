"""Appending to and verifying the per-run hash chain.

Each record's hash covers its own content and the previous record's hash. The run row keeps
the head of its chain (hash and sequence number), so appending needs no extra read: the
caller, which already holds the run row locked, passes the head in and stores the new one,
with its keyed seal (audit.head_seals), which the unkeyed hashes cannot stand in for.
"""

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache

from django.db import transaction
from django.db.models import signals
from django.db.models.base import ModelState
from django.utils import timezone

from .models import AuditRecord

GENESIS = "0" * 64


@dataclass(frozen=True)
class Actor:
    """Who caused a change: a user, or the system and the worker that acted for it."""

    kind: str
    label: str
    user_id: int | None = None

    @classmethod
    def system(cls, worker: str = "system") -> "Actor":
        return cls(kind=AuditRecord.ActorKind.SYSTEM, label=worker)

    @classmethod
    def for_user(cls, user) -> "Actor":
        return cls(kind=AuditRecord.ActorKind.USER, label=user.get_username(), user_id=user.pk)


# The canonical JSON a record's hash covers: json.dumps with these options would build a new
# encoder for every record.
_canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode


def record_hash(*, run_id, seq, action, step_name, actor_kind, actor_label, actor_user_id,
                reason, before, after, data, created_at: datetime, prev_hash) -> str:
    """The hash of one record's content chained to its predecessor's hash."""
    body = _canonical(
        [run_id, seq, action, step_name, actor_kind, actor_label, actor_user_id, reason,
         before, after, data, created_at.isoformat(), prev_hash])
    return hashlib.sha256(body.encode()).hexdigest()


def build_record(*, run_id: int, head_seq: int, head_hash: str, action: str, actor: Actor,
                 reason: str = "", step_name: str = "", before=None, after=None, data=None,
                 created_at: datetime | None = None) -> AuditRecord:
    """An unsaved record that extends the chain whose head is (head_seq, head_hash).

    Callers save it (alone or in a bulk insert) in the transaction of the change it
    describes, and store record.seq and record.hash as the run's new chain head.
    """
    created_at = created_at or timezone.now()
    fields = dict(
        run_id=run_id, seq=head_seq + 1, action=action, step_name=step_name,
        actor_kind=actor.kind, actor_label=actor.label, actor_user_id=actor.user_id,
        reason=reason, before=before or {}, after=after or {}, data=data or {},
        created_at=created_at, prev_hash=head_hash or GENESIS,
    )
    # One round trip for the three, so the hash covers exactly what jsonb will give back.
    fields["before"], fields["after"], fields["data"] = as_stored(
        [fields["before"], fields["after"], fields["data"]])
    return _unsaved(hash=record_hash(**fields), **fields)


@lru_cache(maxsize=1)
def _record_fields() -> frozenset:
    return frozenset(f.attname for f in AuditRecord._meta.concrete_fields if not f.primary_key)


def _unsaved(**values) -> AuditRecord:
    """A new record of `values` (every field but the id), as AuditRecord(**values) makes it,
    without Model.__init__'s work per field (a seventh of building a step's record), unless
    a receiver listens to the model's init signals."""
    if (signals.pre_init.has_listeners(AuditRecord) or signals.post_init.has_listeners(AuditRecord)
            or values.keys() != _record_fields()):
        # A field left out takes its default and an unknown one is refused, as only
        # __init__ does.
        return AuditRecord(**values)
    record = AuditRecord.__new__(AuditRecord)
    record.__dict__.update(values, id=None)
    record._state = ModelState()
    return record


def as_stored(value):
    """`value` as a jsonb column gives it back: JSON text (what json cannot write as str),
    each number as PostgreSQL's numeric keeps the text Python wrote for it."""
    try:
        return _plain_copy(value)
    except (_NotPlain, RecursionError):
        return json.loads(json.dumps(value, default=str), parse_float=_as_numeric)


class _NotPlain(Exception):
    pass


def _plain_copy(value):
    """A copy of a value made only of what JSON gives back unchanged (text, whole numbers,
    booleans, None, lists and text-keyed objects), as the round trip through JSON would
    make it, at a fifth of its cost (a record's data nearly always is such a value);
    _NotPlain for anything else (a float, a date, a key that is no text)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return value
    if kind is dict:
        copy = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            copy[key] = _plain_copy(item)
        return copy
    if kind is list or kind is tuple:
        return [_plain_copy(item) for item in value]
    if isinstance(value, str):  # a choice's value (StepStatus): JSON keeps only its text
        return str.__str__(value)
    raise _NotPlain


def _as_numeric(text: str) -> int | float:
    """jsonb keeps a number as numeric, which has no exponent and no negative zero and
    keeps only the decimals the text had: Python's "1e+16" comes back as the integer
    10000000000000000 and "-0.0" as 0.0. A float read here would hash other than the row
    verify_audit reads later, and the untouched record would look tampered with."""
    number = Decimal(text)
    if number.as_tuple().exponent >= 0:
        return int(number)
    # Adding 0.0 turns -0.0 into 0.0 and leaves every other float as it is.
    return float(number) + 0.0


CONTENT_FIELDS = ("run_id", "seq", "action", "step_name", "actor_kind", "actor_label",
                  "actor_user_id", "reason", "before", "after", "data", "created_at")


def link_problem(record, *, expected_seq: int, prev_hash: str, content_hash: str) -> str | None:
    """Why `record` does not extend a chain whose last record is #expected_seq - 1 with hash
    `prev_hash`, in words an auditor can act on, or None. `content_hash`: the hash of the
    record's content as read. An auditor needs to tell a record that was edited from one
    that went missing before it: the first is read off the record, the second is not."""
    if record.seq != expected_seq:
        return (f"its seq is {record.seq} where {expected_seq} was expected (records before "
                "it were removed or reordered, or its seq was changed)")
    if record.prev_hash != prev_hash:
        return ("its prev_hash is not the hash of the record before it (its prev_hash was "
                "changed, or the record before it was replaced)")
    if record.hash != content_hash:
        return ("its content does not match its hash (a field of it, or its hash, was "
                "changed after it was written)")
    return None


def chain_break(records) -> tuple[AuditRecord, str] | None:
    """The first record of an ordered chain that does not verify and why, or None."""
    prev_hash, expected_seq = GENESIS, 1
    for record in records:
        content = {f: getattr(record, f) for f in CONTENT_FIELDS}
        content_hash = record_hash(prev_hash=record.prev_hash, **content)
        problem = link_problem(record, expected_seq=expected_seq, prev_hash=prev_hash,
                               content_hash=content_hash)
        if problem is not None:
            return record, problem
        prev_hash, expected_seq = record.hash, expected_seq + 1
    return None


def verify_chain(records) -> AuditRecord | None:
    """Return the first record of an ordered chain that does not verify, or None."""
    broken = chain_break(records)
    return broken[0] if broken is not None else None


# Every chain's head as the row it belongs to keeps it: (run id, seq, hash, seal) in run id
# order, for the runs with a chain (the seal: audit.head_seals). Set by the app that keeps
# the heads (runs, at start), as the archive app sets the catalogue of audit.offline: this
# layer names no app above it.
Head = tuple[int, int, str, str]
_heads: Callable[[], Iterator[Head]] | None = None
_snapshot: Callable[[], AbstractContextManager] | None = None


def register_chain_heads(heads: Callable[[], Iterator[Head]],
                         snapshot: Callable[[], AbstractContextManager]) -> None:
    """Let verify_audit compare each chain's end with the head its run keeps (records
    removed from a chain's end, or all of them, leave the rest a chain that verifies) and
    check the head's seal (a chain rewritten with its head verifies too, but for the seal).
    `snapshot()`: a transaction in which the heads and the chains are read as of one
    moment, so that a run moving on meanwhile does not look cut short."""
    global _heads, _snapshot
    _heads, _snapshot = heads, snapshot


def one_snapshot() -> AbstractContextManager:
    """The registered snapshot transaction, or a plain one when no app keeps heads."""
    return _snapshot() if _snapshot is not None else transaction.atomic()


def recorded_heads() -> Iterator[Head] | None:
    """The registered heads (register_chain_heads), or None when no app keeps any."""
    return _heads() if _heads is not None else None


# (run id, archive file name, why or None) of each tombstone, checked against the archive
# file it names (why: what the file does not back); set by the archive app, which keeps them.
TombstoneCheck = tuple[int, str, str | None]
_tombstones: Callable[[], Iterator[TombstoneCheck]] | None = None


def register_tombstone_check(check: Callable[[], Iterator[TombstoneCheck]]) -> None:
    """Let verify_audit name a run that left the hot tables through a tombstone its archive
    file does not back: the trigger lets a run's records go for a tombstone, and a forged one
    would leave no chain and no head behind to tell."""
    global _tombstones
    _tombstones = check


def checked_tombstones() -> Iterator[TombstoneCheck]:
    """The registered check's findings (register_tombstone_check); none without one."""
    return _tombstones() if _tombstones is not None else iter(())
