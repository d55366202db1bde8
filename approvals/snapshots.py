"""What a person approves: the snapshot an approval step's function returns, its hash, and
its rows as a page or an email shows them."""

import hashlib
import json
import re
from dataclasses import dataclass

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import InterfaceError, OperationalError
from django.utils.crypto import salted_hmac

from audit.redaction import REDACTED, redact_text
from runs.definitions import definition
from runs.definitions.contracts import effect_verdict
from runs.machine.context import context_outside_executor
from runs.machine.storable import value_problem, written_visibly
from runs.models import Run, Step

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


def registered_workflow(run: Run) -> definition.Workflow:
    """The definition `run` was started with; SnapshotUnavailable if this process does not
    have it."""
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    if workflow is None:
        raise SnapshotUnavailable(f"{run.workflow_name} v{run.workflow_version} is not "
                                  "registered in this process")
    return workflow


def compute_snapshot(run: Run, step_name: str, *,
                     hashed_as: str | None = None) -> tuple[dict, str]:
    """Call the approval step's function on the run's results as they are now.

    Returns (snapshot, hash). The step function builds the snapshot from earlier results
    and calls nothing; the services object it could reach is closed afterwards anyway.
    `hashed_as` is the hash of the snapshot a pending request was asked with, when it is
    compared with this one (see masked_snapshot).
    """
    workflow = registered_workflow(run)
    try:
        spec = workflow.step(step_name)
    except KeyError as exc:
        raise SnapshotUnavailable(str(exc)) from None
    if spec.kind != definition.APPROVAL:
        verdict = effect_verdict(spec)
        if verdict is None:
            raise SnapshotUnavailable(f"step {step_name} of {workflow.name} is not an approval")
        return attempt_snapshot(run, spec, verdict)
    # The snapshot function builds from earlier results and must not call anything.
    try:
        with context_outside_executor(run, step_name, definition=workflow,
                                      with_services=False) as ctx:
            value = spec.fn(ctx)
            # Masked inside the block: only there are the sensitive values it opened known.
            snapshot = masked_snapshot(
                normalise(value if isinstance(value, dict) else {"value": value}),
                hashed_as=hashed_as)
    except Exception as exc:
        raise SnapshotUnavailable(f"{step_name}: the snapshot function failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
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


def attempt_snapshot(run: Run, spec: definition.StepDef, verdict) -> tuple[dict, str]:
    """What a person approves before one attempt of a step with the stop verdict: the
    action as the step describes it (a redacted summary of what it sends), the system it
    changes, the attempt and key, and why no recovery contract can be written for it. The
    attempt is part of the hash: an approval allows that attempt and no other."""
    step = Step.objects.filter(run=run, name=spec.name).first()
    if step is None:
        raise SnapshotUnavailable(f"run {run.pk} has no step {spec.name!r}")
    snapshot = normalise({
        "intended_action": step.intended_action or spec.plain_description,
        "system": spec.system or "-", "step": spec.name, "impact": spec.impact,
        "attempt": step.attempt + 1, "idempotency_key": step.idempotency_key,
        "verdict": verdict.decision, "why_a_person_approves": verdict.reason,
    })
    return snapshot, snapshot_hash(snapshot)


@dataclass(frozen=True)
class Row:
    label: str
    value: str = ""
    items: tuple[str, ...] = ()


# What ends a line in a mail reader: a value's own line breaks never start a row of their own.
_LINE_BREAKS = re.compile(r"\r\n|[\r\n\u2028\u2029]")


def _visible(text: str) -> str:
    # Line breaks are kept: the mail folds a value's lines under it (_folded).
    return written_visibly(text, keep="\t\n\r", form="<U+{:04X}>")


def _label(key: str) -> str:
    return _visible(str(key).replace("_", " ").replace("-", " ").strip().capitalize())


def _text(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return _visible(canonical_json(value))
    return _visible(str(value))


def snapshot_rows(snapshot) -> list[Row]:
    """The snapshot as labelled rows for a person: an amount next to its currency, lists
    (such as the model's reasons) as items. Values are plain text; templates escape them."""
    if not isinstance(snapshot, dict):
        return [Row("Value", _text(snapshot))]
    rows = []
    for key, value in snapshot.items():
        if key == "currency" and "amount" in snapshot:
            continue
        if key == "amount" and "currency" in snapshot:
            rows.append(Row("Amount", f"{_text(value)} {_text(snapshot['currency'])}"))
        elif key == "arguments" and isinstance(value, dict):
            # A tool call's arguments: one row each, as the tool receives them.
            rows += [Row(f"Argument {k}", _text(v)) for k, v in value.items()]
        elif isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
            rows.append(Row(_label(key), items=tuple(_text(v) for v in value)))
        else:
            rows.append(Row(_label(key), _text(value)))
    return rows


def snapshot_text(snapshot) -> str:
    """The rows as plain text lines, for an email."""
    lines = []
    for row in snapshot_rows(snapshot):
        if row.items:
            lines += _folded(f"  {row.label}:", "")
            for item in row.items:
                lines += _folded("    - ", item)
        else:
            lines += _folded(f"  {row.label}: ", row.value)
    return "\n".join(lines)


def _folded(head: str, value: str) -> list[str]:
    # Continuation lines are indented under the value, so that a value holding a line
    # break cannot add a row ("Amount: 1") of its own to what the approver reads.
    first, *rest = _LINE_BREAKS.split(f"{head}{value}")
    return [first, *(" " * len(head) + line for line in rest)]
