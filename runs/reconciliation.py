"""Operator reconciliation: ask the remote system by key, then record what it said.

The executor settles unknown outcomes the same way (executor.ask_remote); this is the
console's entry point, for a run that is waiting for a person.
"""

from audit.chain import Actor

from . import definition as d
from . import transitions
from .context import StepContext
from .errors import TransitionNotAllowed
from .executor import ask_remote
from .models import Run, Step


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
    step = Step.objects.get(run=run, name=step_name)
    spec = workflow.step(step_name)
    ctx = StepContext(
        run_id=run.pk, workflow=run.workflow_name, business_key=run.business_key,
        input=workflow.input_schema.model_validate(run.input), step=step.name,
        key=step.idempotency_key, attempt=step.attempt, results={},
        services=workflow.services_factory() if workflow.services_factory else None,
        remote_ref=step.remote_ref,
    )
    verdict, error = ask_remote(spec, ctx)
    if verdict is None:
        raise TransitionNotAllowed(
            f"step {step_name} has no reconcile function; record the outcome by hand with "
            "evidence instead")
    return transitions.reconcile(run_id, step_name=step_name, verdict=verdict, actor=actor,
                                 reason=reason, evidence=error or f"lookup by key: {verdict}")
