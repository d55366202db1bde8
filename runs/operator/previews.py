"""What an undo will send, shown to the person who confirms it before anything is sent."""

from ..definitions import definition
from ..machine.context import context_outside_executor
from ..machine.errors import TransitionNotAllowed
from ..models import Run


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
            value = spec.compensation_preview_fn(ctx)
    except TransitionNotAllowed as refusal:  # its input no longer parses: say so
        return {"preview": f"not available: {refusal}"}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) \
        else {"message": str(value)}
