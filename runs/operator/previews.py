"""What an undo will send, shown to the person who confirms it before anything is sent.

The preview is the workflow's own code, run on the run's rows as they are: where it cannot
be built (the run's input no longer parses, or the preview itself raises, as one a release
changed may on an older run that lacks a result key it reads) it is "not available", with
the reason. The undo does not depend on it: a person can still read why and confirm.

The other lines of the confirmation dialogs are built here too: what compensating a run will
undo, and what an action aimed at one tool call will do to that call."""

from types import SimpleNamespace

from audit.redaction import redact_text

from ..agent_models import ToolCallStatus
from ..definitions import definition
from ..machine.context import context_outside_executor
from ..machine.errors import CODE_FAILURES, TransitionNotAllowed
from ..machine.intentions import step_lines
from ..machine.storable import printable
from ..machine.transitions.compensation import asks_a_person, compensation_plan, undo_of
from ..machine.transitions.in_flight import EFFECT_STANDS, compensation_order
from ..machine.transitions.tool_call_rules import calls_of, unworkable_call
from ..models import Run, Step, StepStatus


def compensation_preview(run: Run, step_name: str) -> dict | None:
    """What the compensation of `step_name` will send, built by the step's declared
    compensation preview without sending anything; None if it declares none (or the
    workflow no longer has that step)."""
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    spec = definition.step_of(workflow, step_name)
    if spec is None or spec.compensation_preview_fn is None:
        return None
    try:
        with context_outside_executor(run, step_name, definition=workflow,
                                      with_services=False, compensating=True) as ctx:
            try:
                value = spec.compensation_preview_fn(ctx)
            except CODE_FAILURES as exc:  # the workflow's code, whatever it raises
                # Only the preview's own failure: the rows it was given were read fine.
                return {"preview": f"not available: the preview raised {_error_text(exc)}"}
    except TransitionNotAllowed as refusal:  # its input no longer parses: say so
        return {"preview": f"not available: {refusal}"}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) \
        else {"message": str(value)}


def _error_text(exc: Exception) -> str:
    # Shown on the page and kept in the confirmation's audit record: no credential, and
    # nothing the database cannot store.
    return printable(redact_text(f"{type(exc).__name__}: {exc}"))[:500]


_PAUSES = " - HIGH IMPACT: pauses for a person to confirm"
_EFFECT_KINDS = (definition.WRITE, definition.NOTIFY)


def compensation_outline(run: Run, steps: list[Step]) -> list[str]:
    """What compensating `run` will undo, in the order it will undo it, by the rules the
    compensation itself follows (compensation.compensation_plan, in_flight.compensation_order,
    compensation.asks_a_person, the stop at an undo the code no longer declares): each step's
    undo, an agent step's as its tool calls' undos one by one, each pause for a person, and
    the effects that stand and are not undone because they declared no undo."""
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    plan = compensation_plan(steps, workflow)
    if not plan:
        return ["There is no completed step to compensate."]
    code = f"{run.workflow_name} v{run.workflow_version}"
    did, calls = step_lines(run, steps), {}
    lines = ["Order (newest effect first), each undo with what it will do:"]
    for step in plan:
        if step.kind == definition.AGENT:
            calls[step.pk] = calls_of(step)
            spec = definition.step_of(workflow, step.name)
            stop = (None if spec is None else unworkable_call(calls[step.pk], spec, code,
                                                                compensating=True))
            if spec is None or stop is not None:
                why = (f"{code} here has no step {step.name}" if spec is None
                       else f"tool call {stop[0].ref} ({stop[0].tool}): {stop[1]}")
                lines.append(_stop_line(len(lines), step.name, why))
                break
            for call in compensation_order(calls[step.pk]):
                lines.append(f"{len(lines)}. {step.name}: tool {call.tool} (call {call.ref}, "
                             f"{call.remote_ref or 'no reference'})"
                             f"{_PAUSES if asks_a_person(call) else ''}{_again(call)}: "
                             "undoes the call with its compensation key")
            continue
        if undo_of(workflow, step.name) is None:
            lines.append(_stop_line(len(lines), step.name,
                                    f"{code} here declares no undo for it"))
            break
        preview = compensation_preview(run, step.name)
        undo = ("sends " + "; ".join(f"{k}: {v}" for k, v in preview.items()) if preview
                else f"undoes: {did.get(step.name, step.kind)}")
        lines.append(f"{len(lines)}. {step.name} ({step.remote_ref or 'no reference'})"
                     f"{_PAUSES if asks_a_person(step) else ''}{_again(step)}: {undo}")
    kept = _not_undone(steps, calls)
    if kept:
        lines += ["Not undone (no undo declared): they stand after the compensation:", *kept]
    lines.append("A compensation that fails leaves the run in compensation_failed.")
    return lines


def _again(row) -> str:
    if row.status == StepStatus.COMPENSATION_FAILED:
        return " (its undo failed before: sent again with the same key)"
    if row.status == StepStatus.COMPENSATING:
        return " (its undo is under way: sent with its key)"
    return ""


def _stop_line(number: int, name: str, why: str) -> str:
    return (f"{number}. {name}: the compensation STOPS HERE as compensation_failed, waiting "
            f"for a person ({why}); nothing older is undone")


def _not_undone(steps: list[Step], calls: dict[int, list]) -> list[str]:
    kept = [f"- {s.name} ({s.remote_ref or 'no reference'})" for s in steps
            if s.kind in _EFFECT_KINDS and s.status == StepStatus.SUCCEEDED
            and not s.compensation_key]
    for step in steps:
        if step.kind != definition.AGENT:
            continue
        mine = calls[step.pk] if step.pk in calls else calls_of(step)
        kept += [f"- {step.name}: tool {c.tool} (call {c.ref}, {c.remote_ref or 'no reference'})"
                 for c in mine if c.status in EFFECT_STANDS and not c.compensation_key
                 and c.kind in (*_EFFECT_KINDS, "")]
    return kept


def tool_call_outline(action: str, call: dict) -> list[str]:
    """What `action` will do to this one tool call, for its confirmation dialog, by the rules
    the action follows. `call` is the call as the console reads it
    (runs.reads.agent_selectors.conversations): it reads no row, so a page of calls costs no
    query."""
    where = f"Tool call {call['ref']} ({call['tool']}, {call['impact'] or 'low'} impact)"
    key = call["key"]
    if action == "reconcile_tool_call":
        lines = [f"{where}: the remote system is asked by the call's idempotency key {key}."]
        if call["impact"] == definition.HIGH:
            # Not found, the model is told the call did not happen. Its repeat with the same
            # arguments takes this key; other arguments are another action under a new key,
            # which waits for a person (transitions.repeats).
            lines.append("HIGH IMPACT: a \"not found\" answer is told to the model. If it "
                         "asks for the call again with the same arguments, the call is sent "
                         f"with this key {key}, so a receiver that honours keys does it once "
                         "even if a request is still in flight; with other arguments, under a "
                         "new key, after a person approves it. Consider looking it up by key "
                         "again first, or waiting, before recording \"not found\".")
        return lines
    if action == "retry_tool_call":
        return [f"{where} is sent again with the same idempotency key {key}: a receiver that "
                "honours keys does it at most once."]
    if action == "compensate_tool_call":
        # By the rule the compensation itself pauses by (compensation.asks_a_person).
        pauses = asks_a_person(SimpleNamespace(kind=call["kind"], impact=call["impact"],
                                               status=call["status"]))
        return [f"{where}: its undo is sent with the compensation key "
                f"{call['compensation_key'] or '-'} (the call's own key is {key}); "
                + ("HIGH IMPACT: it pauses for a person to confirm what it will send."
                   if pauses else "it does not pause for confirmation (not high impact).")]
    if action == "cancel_tool_call":
        lines = [f"{where} is never sent: nothing goes out under its key {key}, and the model "
                 "is told in its next turn that a person cancelled it."]
        if call["status"] == ToolCallStatus.WAITING:
            # Of its arguments, or of its attempt (the stop verdict): either request goes.
            lines.append("It waits for a person's approval: that approval request is "
                         "withdrawn.")
        return lines
    return []
