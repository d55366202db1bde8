"""An operator undoes one tool call of an agent step: the intent checkpoint, the tool's
compensation sent with the call's own compensation key outside any transaction, the outcome
checkpoint (runs.machine.transitions.agent_operator). The run stays in attention throughout."""

import dataclasses

from audit.chain import Actor

from ..definitions import definition
from ..machine import sensitive, transitions
from ..machine.context import context_outside_executor, parsed_input
from ..machine.errors import CODE_FAILURES, TransitionNotAllowed, classify
from ..models import Run, ToolCall


def undo_tool_call(run_id: int, *, step_name: str, call_ref: str, actor: Actor,
                   reason: str) -> ToolCall:
    """Undo tool call `call_ref` ("turn.index") of `step_name` in run `run_id`. Returns the
    call as recorded: compensated, or compensation_failed with the error (asking again
    sends the undo again with the same key)."""
    run = Run.objects.get(pk=run_id)
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    if workflow is None:
        raise TransitionNotAllowed(f"{run.workflow_name} v{run.workflow_version} is not "
                                   "registered: its tools' compensations are unknown")
    parsed_input(run, workflow)  # refused before its attempt is counted, as nothing is sent
    call = transitions.begin_tool_call_undo(run_id, step_name=step_name, call_ref=call_ref,
                                            actor=actor, reason=reason)
    tool = workflow.step(step_name).tools[call.tool]
    ref, error, error_class = "", "", ""
    try:
        with context_outside_executor(run, step_name, definition=workflow,
                                      with_services=True, compensating=True) as ctx:
            ctx = dataclasses.replace(ctx, key=call.compensation_key,
                                      attempt=call.compensation_attempt,
                                      remote_ref=call.remote_ref)
            args = tool.args.model_validate(sensitive.opened(call.arguments))
            value = tool.compensate_fn(ctx, args)
        ref = value.remote_ref if isinstance(value, definition.StepResult) else ""
    except CODE_FAILURES as exc:  # recorded as the undo's outcome, then shown to the person
        failure = classify(exc, non_retryable=tool.retry.non_retryable)
        error, error_class = failure.message or type(exc).__name__, failure.error_class
    return transitions.record_tool_call_undo(
        run_id, call_id=call.pk, attempt=call.compensation_attempt, actor=actor,
        remote_ref=ref, error=error, error_class=error_class)

