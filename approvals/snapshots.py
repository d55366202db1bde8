"""What a person approves: the snapshot an approval step's function returns, its hash, and
its rows as a page or an email shows them."""

import re
from dataclasses import dataclass

from runs.definitions import definition
from runs.definitions.contracts import effect_verdict
from runs.machine import sensitive
from runs.machine.approval_snapshots import (  # noqa: F401 - this app's names for them
    MASKED_VALUES_FIELD,
    SnapshotUnavailable,
    approval_snapshot,
    as_shown,
    canonical_json,
    database_failure,
    masked_snapshot,
    normalise,
    snapshot_hash,
)
from runs.machine.context import context_outside_executor
from runs.machine.storable import written_visibly
from runs.models import Run, Step


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
    return approval_snapshot(step_name, spec.fn, context_outside_executor(
        run, step_name, definition=workflow, with_services=False), hashed_as=hashed_as)


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


def unopened_arguments(call_ref: str, arguments) -> SnapshotUnavailable | None:
    """Why tool call `call_ref`'s `arguments` cannot be opened (a value sealed with a key
    FIELD_ENCRYPTION_KEYS no longer holds), with what it met as its cause; None if they
    can. What a person is shown of them masks a sealed value whatever the ring holds
    (sensitive.shown), but approved, the call is made only if its worker opens them: until
    the key is back, nobody can be asked for it (requests.tool_call_snapshot) nor decide a
    request made before the key left (unreadable.payload_now)."""
    try:
        sensitive.opened(arguments)
    except sensitive.UnreadableValue as exc:
        problem = SnapshotUnavailable(f"tool call {call_ref}: its arguments cannot be "
                                      f"opened: {exc}")
        problem.__cause__ = exc
        return problem
    return None


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
    (such as the model's reasons) as items. Values are plain text; templates escape them.
    The hash that binds its masked values is no row (as_shown)."""
    snapshot = as_shown(snapshot)
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
