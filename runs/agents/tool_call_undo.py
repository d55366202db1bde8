"""An operator undoes one tool call of an agent step: the intent checkpoint, the tool's
compensation sent with the call's own compensation key outside any transaction, the outcome
checkpoint (runs.machine.transitions.agent_operator). The run stays in attention throughout.

The person's own process sends the undo, with no lease: a call being undone looks the same
in its row whether its sender is still waiting for the answer or died (then asking again
must send it again). So the sender holds the call's lock (runs.machine.single_pass) from
before the intent until the outcome is recorded; the server lets it go when the sender's
session dies. A second request meanwhile (a double click, two people) is refused, and
sends nothing: sent twice, the earlier answer was filed as a late result and its person
told that an undo which worked had failed."""

import dataclasses
import hashlib

from audit.chain import Actor

from ..definitions import definition
from ..machine import sensitive, transitions
from ..machine.context import context_outside_executor, parsed_input
from ..machine.errors import CODE_FAILURES, TransitionNotAllowed, classify
from ..machine.invocation import invoke
from ..machine.single_pass import single_pass
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
    with single_pass(undo_lock_name(run_id, step_name, call_ref)) as held:
        if not held:
            raise TransitionNotAllowed(
                f"the undo of tool call {call_ref} of {step_name} is being sent by another "
                "request now; nothing changed: its answer is recorded when it comes, then "
                "the run's page shows it")
        return _undo_held(run, workflow, step_name=step_name, call_ref=call_ref,
                          actor=actor, reason=reason)


def undo_lock_name(run_id: int, step_name: str, call_ref: str) -> str:
    """The name of the lock a person's undo of one tool call holds while it is sent: of
    digits and letters only (on SQLite it names a file), one for each call."""
    named = hashlib.sha256(f"{run_id}\0{step_name}\0{call_ref}".encode()).hexdigest()
    return f"undo-tool-call-{named[:32]}"


def _undo_held(run: Run, workflow, *, step_name: str, call_ref: str, actor: Actor,
               reason: str) -> ToolCall:
    run_id = run.pk
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
