"""What an approval step's function returns, made into what a person approves: the snapshot
as it may be stored, shown and mailed (sensitive values and credentials masked), and its
hash. Made here, for the two that ask for it: the approvals app opening a request
(approvals.snapshots), and the lease holder asking the step's approve_if whether a person is
needed at all (runs.machine.transitions.approval_rules). Both judge the same snapshot."""

import hashlib
import json
from collections.abc import Callable
from contextlib import AbstractContextManager

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import InterfaceError, OperationalError
from django.utils.crypto import salted_hmac

from audit.redaction import REDACTED, redact_text

from .errors import CODE_FAILURES, raise_if_process_stopping
from .storable import value_problem

# The snapshot's field that binds the values masked in it (see masked_snapshot).
MASKED_VALUES_FIELD = "masked_values_hmac"


class SnapshotUnavailable(Exception):
    """The step's snapshot cannot be computed now (definition missing, step function failed)."""


def database_failure(exc: BaseException) -> OperationalError | InterfaceError | None:
    """The database error `exc` is, or was caused by (a snapshot function's failure wraps
    the error it met: a statement cancelled, a row held past lock_timeout, the connection
    lost), or None for a failure of the code itself."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OperationalError | InterfaceError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def canonical_json(value) -> str:
    """The one serialisation the hash is taken over: sorted keys, no spaces, UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      cls=DjangoJSONEncoder)


def snapshot_hash(snapshot) -> str:
    return hashlib.sha256(canonical_json(snapshot).encode()).hexdigest()


def normalise(value):
    """The value as the database will give it back (Decimals, dates as JSON), so a
    snapshot hashes the same before it is stored and after it is read."""
    return json.loads(canonical_json(value))


def as_shown(snapshot):
    """`snapshot` as a person is shown it and an approval step's rule is asked with it:
    without MASKED_VALUES_FIELD, which binds values neither sees and tells them nothing. The
    snapshot stored, and its hash, keep it."""
    if isinstance(snapshot, dict) and MASKED_VALUES_FIELD in snapshot:
        return {key: value for key, value in snapshot.items() if key != MASKED_VALUES_FIELD}
    return snapshot


def approval_snapshot(step_name: str, fn: Callable, context: AbstractContextManager, *,
                      hashed_as: str | None = None) -> tuple[dict, str]:
    """(snapshot, hash): what approval step `step_name`'s function `fn` returns, called with
    the step context `context` yields (built without services, inside
    audit.redaction.values_masked), normalised and masked (masked_snapshot, `hashed_as`).
    SnapshotUnavailable, caused by what it met, when it cannot be made: the context or the
    function failed (a sealed value no key opens, an earlier result missing), or what it
    returned is more than the database stores."""
    try:
        with context as ctx:
            value = fn(ctx)
            # Masked inside the block: only there are the sensitive values it opened known.
            snapshot = masked_snapshot(
                normalise(value if isinstance(value, dict) else {"value": value}),
                hashed_as=hashed_as)
    except CODE_FAILURES as exc:
        raise_if_process_stopping(exc)
        raise SnapshotUnavailable(f"{step_name}: the snapshot function failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
    if isinstance(value, dict) and MASKED_VALUES_FIELD in value:
        # Nobody is shown that field (as_shown): what it held would be approved unseen.
        raise SnapshotUnavailable(f"{step_name}: the snapshot has a field named "
                                  f"{MASKED_VALUES_FIELD}, which the runtime keeps for the "
                                  "hash of its masked values; rename it")
    # What the function made of the results (a NUL, a lone surrogate, NaN) may be more than
    # the database stores: the request would be refused by it at every try, so nobody could
    # ever be asked. Said as such, like any other snapshot that cannot be made.
    if (problem := value_problem(snapshot)) is not None:
        raise SnapshotUnavailable(f"{step_name}: the snapshot cannot be stored: {problem}")
    return snapshot, snapshot_hash(snapshot)


def _masked(value):
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, int | float) and not isinstance(value, bool) \
            and redact_text(str(value)) != str(value):
        return REDACTED  # a sensitive number: masking part of its digits would mislead
    return value


def masked_snapshot(snapshot: dict, *, hashed_as: str | None = None) -> dict:
    """`snapshot` as it may be stored, shown and mailed: the declared sensitive values the
    step function read (in clear, through ctx.results) and credentials masked. A request
    must still be superseded when a masked value changes (an approval for one account never
    pays another), so the clear snapshot is bound in by a keyed hash: a plain one would let
    anyone holding the mail try IBANs against it.

    The hash is keyed with SECRET_KEY. A request asked before SECRET_KEY was rotated holds
    it under the key replaced: while that key is in SECRET_KEY_FALLBACKS, the snapshot is
    bound under the key whose result has the request's hash (`hashed_as`), so the same
    values still match it; changed values match under no key. Once the key is dropped,
    such a request is superseded and asked again, never approved unseen."""
    shown = _masked(snapshot)
    if shown == snapshot:
        return snapshot
    bound = [{**shown, MASKED_VALUES_FIELD: salted_hmac(
        MASKED_VALUES_FIELD, canonical_json(snapshot), secret=secret,
        algorithm="sha256").hexdigest()}
        for secret in (settings.SECRET_KEY, *settings.SECRET_KEY_FALLBACKS)]
    return next((each for each in bound if snapshot_hash(each) == hashed_as), bound[0])
