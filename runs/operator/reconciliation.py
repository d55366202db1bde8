"""Operator reconciliation: ask the remote system by key, then record what it said, for a
step or for one tool call of an agent step.

The executor settles unknown outcomes the same way (executor.ask_remote, agent_loop's
ask_tool_remote); this is the console's entry point, for a run that is waiting for a person.
The transition's own checks (a reason, the step and the call, its refusal rules) come first,
so a run that would refuse the action is never looked up in another system. The lookup runs
outside any transaction; the transition then re-checks the run's state under its lock, so a
run that moved on meanwhile is refused, not double-settled. A caller's own last check (a bulk
job's lease: answers_guarded) is made there too, in the transaction that records the answer.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from audit.chain import Actor

from .. import store
from ..agent_models import ToolCallStatus
from ..agents.agent_loop import ask_tool_remote, tool_context
from ..definitions import definition
from ..execution.executor import ask_remote
from ..machine import transitions
from ..machine.context import context_outside_executor
from ..machine.errors import TransitionNotAllowed
from ..machine.transitions.agent_calls import checked_call, find_call
from ..machine.transitions.operator_rules import check_before_work
from ..machine.transitions.tool_call_rules import args_problem
from ..models import Run, Step, StepStatus


def reconcile_step(run_id: int, *, step_name: str, actor: Actor, reason: str) -> Run:
    """Ask the remote system whether `step_name` of `run_id` took effect, and settle it
    (transitions.reconcile)."""
    run = check_before_work("reconcile", run_id, reason=reason, step_name=step_name).run
    workflow = _registered(run)
    spec = _step(workflow, step_name)
    if spec.reconcile_fn is None:
        raise TransitionNotAllowed(
            f"step {step_name} has no reconcile function; record the outcome by hand with "
            "evidence instead")
    with context_outside_executor(run, step_name, definition=workflow,
                                  with_services=True) as ctx:
        verdict, error = ask_remote(spec, ctx)
    return _recorded(run_id, lambda: transitions.reconcile(
        run_id, step_name=step_name, verdict=verdict, actor=actor, reason=reason,
        evidence=_evidence(verdict, error), looked_up=True))


def reconcile_tool_call_by_key(run_id: int, *, step_name: str, call_ref: str, actor: Actor,
                               reason: str) -> Run:
    """Ask the remote system whether tool call `call_ref` (turn.index) of `step_name` took
    effect, by its key, and settle it (transitions.reconcile_tool_call)."""
    checked = check_before_work("reconcile_tool_call", run_id, reason=reason,
                                step_name=step_name, call_ref=call_ref)
    # The call's own rule too (only an unknown call is reconciled), as the transition asks it.
    call = checked_call(checked, "reconcile_tool_call", step_name, call_ref)[1]
    run = checked.run
    workflow = _registered(run)
    spec = _step(workflow, step_name)
    tool = spec.tools.get(call.tool) if isinstance(spec, definition.AgentSpec) else None
    if tool is None or tool.reconcile_fn is None:
        raise TransitionNotAllowed(
            f"tool {call.tool} declares no reconcile function; record the outcome by hand "
            "with evidence instead")
    problem = args_problem(tool, call)
    if problem:  # the lookup is asked with the arguments: a release narrowed their schema
        raise TransitionNotAllowed(f"tool call {call_ref} cannot be looked up: {problem}; "
                                   "record the outcome by hand with evidence instead")
    with context_outside_executor(run, step_name, definition=workflow,
                                  with_services=True) as ctx:
        verdict, error = ask_tool_remote(tool, tool_context(ctx, call), call)
    return _recorded(run_id, lambda: transitions.reconcile_tool_call(
        run_id, step_name=step_name, call_ref=call_ref, verdict=verdict, actor=actor,
        reason=reason, evidence=_evidence(verdict, error), looked_up=True))


# The caller's last check while it reconciles by key (answers_guarded), or None.
_answer_guard: ContextVar[Callable[[], None] | None] = ContextVar("reconcile_answer_guard",
                                                                   default=None)


@contextmanager
def answers_guarded(guard: Callable[[], None] | None) -> Iterator[None]:
    """Within the block, the answer of a lookup by key is recorded only if `guard` (the
    caller's last check: approvals.operator_actions.act's, a bulk job's lease) passes in the
    transaction that records it, with the run locked; what it raises is raised and nothing
    is recorded. A check made before the lookup says nothing of the moment of the record: a
    worker that stalled in the lookup past its bulk job's lease would record beside the
    worker that took the job over. None: nothing more is checked."""
    token = _answer_guard.set(guard)
    try:
        yield
    finally:
        _answer_guard.reset(token)


def _recorded(run_id: int, record: Callable[[], Run]) -> Run:
    guard = _answer_guard.get()
    if guard is None:
        return record()
    with store.current().transaction():
        # The run first, as every transition locks it, then what the guard holds (a bulk
        # job's row), in act's order where its check locks the run: no two wait on each
        # other. The transition takes the run locked here rather than reading it again.
        run = store.current().lock_run(run_id)
        guard()
        with transitions.within_caller_transaction(locked=run):
            return record()


def _registered(run: Run) -> definition.Workflow:
    workflow = definition.registry.get(run.workflow_name, run.workflow_version)
    if workflow is None:
        raise TransitionNotAllowed(
            f"{run.workflow_name} v{run.workflow_version} is not registered; record the "
            "outcome by hand with evidence instead")
    return workflow


def _step(workflow: definition.Workflow, step_name: str) -> definition.StepDef:
    spec = definition.step_of(workflow, step_name)
    if spec is None:
        raise TransitionNotAllowed(
            f"{workflow.name} v{workflow.version} has no step {step_name!r} any more; record "
            "the outcome by hand with evidence instead")
    return spec


def _evidence(verdict, error: str) -> str:
    # What the lookup asked and got, the evidence the transition requires.
    return error or f"lookup by key: {verdict}"


def answer_by_key(run: Run, step_name: str, call_ref: str = "") -> str:
    """What a reconcile by key established, in a person's words, read from the state it left
    the step (or its tool call `call_ref`) in: found, found not to have happened, or still
    unknown. "Done" alone would leave a person believing an effect settled that is not."""
    if call_ref:
        effect, done, not_done = (f"tool call {call_ref} of {step_name}",
                                  ToolCallStatus.SUCCEEDED, ToolCallStatus.FAILED)
        status = find_call(run, step_name, call_ref).status
    else:
        effect, done, not_done = step_name, StepStatus.SUCCEEDED, StepStatus.FAILED
        status = Step.objects.values_list("status", flat=True).get(run=run, name=step_name)
    if status == done:
        return f"the remote system has {effect} under its key: it is recorded as done."
    if status == not_done:
        return (f"the remote system has nothing under the key of {effect}: it is recorded "
                "as not done (failed).")
    return (f"the remote system could not tell whether {effect} happened: its outcome is "
            "still unknown (its last error says why). Ask again later, or record the "
            "outcome by hand with evidence.")
