"""Operator reconciliation: ask the remote system by key, then record what it said.

The executor settles unknown outcomes the same way (executor.ask_remote); this is the
console's entry point, for a run that is waiting for a person.
"""

from types import MappingProxyType

from audit.chain import Actor

from . import definition as d
from . import transitions
from .context import StepContext
from .errors import TransitionNotAllowed
from .executor import ask_remote
from .models import Run, Step, StepStatus


def reconcile_step(run_id: int, *, step_name: str, actor: Actor, reason: str = "") -> Run:
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
    verdict, error = ask_remote(workflow.step(step_name),
                                reconcile_context(run, workflow, step_name))
    if verdict is None:
        raise TransitionNotAllowed(
            f"step {step_name} has no reconcile function; record the outcome by hand with "
            "evidence instead")
    return transitions.reconcile(run_id, step_name=step_name, verdict=verdict, actor=actor,
                                 reason=reason, evidence=error or f"lookup by key: {verdict}")


def reconcile_context(run: Run, workflow: d.Workflow, step_name: str) -> StepContext:
    """The context a step's reconcile function gets outside the executor: the step's key and
    the results recorded so far."""
    steps = list(Step.objects.filter(run=run).order_by("position"))
    step = next(s for s in steps if s.name == step_name)
    return StepContext(
        run_id=run.pk, workflow=run.workflow_name, business_key=run.business_key,
        input=workflow.input_schema.model_validate(run.input), step=step.name,
        key=step.idempotency_key, attempt=step.attempt,
        results=MappingProxyType({s.name: s.result for s in steps
                                  if s.status == StepStatus.SUCCEEDED}),
        services=workflow.services_factory() if workflow.services_factory else None,
        remote_ref=step.remote_ref,
    )
