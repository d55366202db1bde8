"""What an undo will send, shown to the person who confirms it before anything is sent.

The preview is the workflow's own code, run on the run's rows as they are: where it cannot
be built (the run's input no longer parses, or the preview itself raises, as one a release
changed may on an older run that lacks a result key it reads) it is "not available", with
the reason. The undo does not depend on it: a person can still read why and confirm."""

from audit.redaction import redact_text

from ..definitions import definition
from ..machine.context import context_outside_executor
from ..machine.errors import CODE_FAILURES, TransitionNotAllowed
from ..machine.storable import printable
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
