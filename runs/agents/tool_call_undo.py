"""An operator undoes one tool call of an agent step: the intent checkpoint, the tool's
compensation sent with the call's own compensation key outside any transaction, the outcome
checkpoint (runs.machine.transitions.agent_operator). The run stays in attention throughout."""

import dataclasses

from audit.chain import Actor

from ..definitions import definition
from ..machine import sensitive, transitions
from ..machine.context import context_outside_executor, parsed_input
from ..machine.errors import CODE_FAILURES, TransitionNotAllowed, classify
from ..machine.invocation import invoke
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
    try:
        with context_outside_executor(run, step_name, definition=workflow,
                                      with_services=True, compensating=True) as ctx:
            undo = sent(tool, dataclasses.replace(
                ctx, key=call.compensation_key, attempt=call.compensation_attempt,
                remote_ref=call.remote_ref), call)
    except CODE_FAILURES as exc:  # the workflow's services failed to open or to close
        undo = transitions.Outcome(succeeded=False, error=classify(
            exc, non_retryable=tool.retry.non_retryable))
    ref, error, error_class = undo.remote_ref, "", ""
    if not undo.succeeded:
        error, error_class = undo.error.message, undo.error.error_class
    return transitions.record_tool_call_undo(
        run_id, call_id=call.pk, attempt=call.compensation_attempt, actor=actor,
        remote_ref=ref, error=error, error_class=error_class)


def sent(tool: definition.ToolSpec, ctx, call: ToolCall) -> transitions.Outcome:
    """Send the undo of tool call `call` (ctx carries its compensation key) by the one way
    every effect's code is called (runs.machine.invocation): bounded by the call deadline,
    its failure classified, and of what it returned only the remote reference kept, checked
    as any call's."""
    return invoke(f"undo of tool call {call.ref} ({call.tool})", "undo", _undo, tool, ctx,
                  call, retry=tool.retry, accept=_reference_only)


def _undo(tool: definition.ToolSpec, ctx, call: ToolCall):
    return tool.compensate_fn(ctx, tool.args.model_validate(sensitive.opened(call.arguments)))


def _reference_only(value) -> None:
    return None
