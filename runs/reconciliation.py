"""Operator reconciliation: ask the remote system by key, then record what it said.

The executor settles unknown outcomes the same way (executor.ask_remote); this is the
console's entry point, for a run that is waiting for a person.
"""

from audit.chain import Actor

from . import definition as d
from . import transitions
from .context import context_outside_executor
from .errors import TransitionNotAllowed
from .executor import ask_remote
from .models import Run


def reconcile_step(run_id: int, *, step_name: str, actor: Actor, reason: str) -> Run:
    """Ask the remote system whether `step_name` of `run_id` took effect, and settle it.

    The lookup runs outside any transaction; the transition then re-checks the run's state
    under its lock, so a run that moved on meanwhile is refused, not double-settled.
    """
    run = Run.objects.get(pk=run_id)
    workflow = d.registry.get(run.workflow_name, run.workflow_version)
    if workflow is None:
        raise TransitionNotAllowed(
            f"{run.workflow_name} v{run.workflow_version} is not registered; record the "
            "outcome by hand with evidence instead")
    spec = workflow.step(step_name)
    if spec.reconcile_fn is None:
        raise TransitionNotAllowed(
            f"step {step_name} has no reconcile function; record the outcome by hand with "
            "evidence instead")
    with context_outside_executor(run, step_name, definition=workflow,
                                  with_services=True) as ctx:
        verdict, error = ask_remote(spec, ctx)
    return transitions.reconcile(run_id, step_name=step_name, verdict=verdict, actor=actor,
                                 reason=reason, evidence=error or f"lookup by key: {verdict}")
