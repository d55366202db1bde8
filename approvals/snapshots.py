"""What a person approves: the snapshot an approval step's function returns, its hash, and
its rows as a page or an email shows them."""

import hashlib
import json
from dataclasses import dataclass

from django.core.serializers.json import DjangoJSONEncoder

from runs.definitions import definition
from runs.definitions.contracts import effect_verdict
from runs.machine.context import context_outside_executor
from runs.models import Run, Step


class SnapshotUnavailable(Exception):
    """The step's snapshot cannot be computed now (definition missing, step function failed)."""


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


def compute_snapshot(run: Run, step_name: str) -> tuple[dict, str]:
    """Call the approval step's function on the run's results as they are now.

    Returns (snapshot, hash). The step function builds the snapshot from earlier results
    and calls nothing; the services object it could reach is closed afterwards anyway.
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
        snapshot = normalise(value if isinstance(value, dict) else {"value": value})
    except Exception as exc:
        raise SnapshotUnavailable(f"{step_name}: the snapshot function failed: "
                                  f"{type(exc).__name__}: {exc}") from exc
    return snapshot, snapshot_hash(snapshot)


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


def _label(key: str) -> str:
    return str(key).replace("_", " ").replace("-", " ").strip().capitalize()


def _text(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict | list):
        return canonical_json(value)
    return str(value)


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
            lines.append(f"  {row.label}:")
            lines += [f"    - {item}" for item in row.items]
        else:
            lines.append(f"  {row.label}: {row.value}")
    return "\n".join(lines)
