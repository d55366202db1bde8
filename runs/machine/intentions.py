"""What a step will do, in one line, for people: its declared description computed from the
input and earlier results, or its kind and system when it declares none."""

from audit.redaction import redact_text

from ..definitions import definition
from .context import build_context
from .errors import CODE_FAILURES, raise_if_process_stopping

MAX_LENGTH = 300


def intended_action(workflow_def: definition.Workflow, spec: definition.StepDef, run, steps, step,
                    validated_input=None) -> str:
    """The line for `step` of `run` now. Never raises: a description that fails says so
    next to the plain one, and the step still runs."""
    if spec.describe_fn is None:
        return spec.plain_description
    try:
        ctx = build_context(run, steps, step, definition=workflow_def, services=None,
                            validated_input=validated_input)
        text = str(spec.describe_fn(ctx))
    except CODE_FAILURES as exc:
        raise_if_process_stopping(exc)
        return f"{spec.plain_description} (its description failed: {type(exc).__name__})"
    text = redact_text(" ".join(text.split()))
    return text if len(text) <= MAX_LENGTH else text[:MAX_LENGTH - 1] + "…"


def step_lines(run, steps) -> dict[str, str]:
    """What each step of `run` did or will do: the line stored with its intent, else the one
    it would get now (pure: nothing is called)."""
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    lines, validated = {}, None
    for step in steps:
        if step.intended_action or workflow is None:
            lines[step.name] = step.intended_action or step.kind
            continue
        try:
            spec = workflow.step(step.name)
        except KeyError:
            lines[step.name] = step.kind
            continue
        if validated is None and spec.describe_fn is not None:
            try:
                validated = workflow.input_schema.model_validate(run.input)
            except Exception:
                validated = None
        lines[step.name] = intended_action(workflow, spec, run, steps, step,
                                           validated_input=validated)
    return lines
