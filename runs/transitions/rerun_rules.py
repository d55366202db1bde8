"""When a run can be re-run from a chosen step (runs.transitions.rerun), and which effects
already stand from there on: read by operator_rules.refusal and by the dialog."""

from .. import definition as d
from ..models import Run, Step, StepStatus
from .kernel import DONE_STEP_STATUSES, Effect

# The states in which a step's effect stands in another system (not undone).
_STANDS = {
    StepStatus.SUCCEEDED: "succeeded",
    StepStatus.UNKNOWN: "outcome unknown: may have happened",
    StepStatus.COMPENSATION_FAILED: "undo failed: still stands",
}


def rerun_range(steps: list[Step], step: Step) -> list[Step]:
    """The steps a re-run from `step` sends again: it and the later ones."""
    return [s for s in steps if s.position >= step.position]


def standing_effects(steps: list[Step], step: Step) -> list[Effect]:
    """The effects (writes and notifications, any impact) that already stand from `step` on:
    a re-run sends each again with a new key, it does not undo them."""
    return [Effect(s.name, s.status, f"{_STANDS[s.status]} ({s.impact} impact, key "
                                     f"{s.idempotency_key[:12]}..., "
                                     f"ref {s.remote_ref or 'none'})", s.name)
            for s in rerun_range(steps, step)
            if s.kind in (d.WRITE, d.NOTIFY) and s.status in _STANDS]


def rerun_step_refusal(run: Run, step: Step, steps: list[Step]) -> str | None:
    """Why the run cannot be re-run from `step`, or None if it can."""
    where = f"step {step.name} of run {run.pk}"
    earlier = [s.name for s in steps if s.position < step.position
               and s.status not in DONE_STEP_STATUSES]
    if earlier:
        return (f"{where}: the earlier steps {', '.join(earlier)} did not succeed, so their "
                "results cannot be reused; re-run from the first of them")
    sent_again = rerun_range(steps, step)
    agents = [s.name for s in sent_again if s.kind == d.AGENT]
    if agents:
        return (f"{where}: the agent step {', '.join(agents)} would be sent again; a re-run "
                "over an agent step's tool calls is not offered (retry or undo its calls)")
    unknown = [s.name for s in sent_again if s.status == StepStatus.UNKNOWN]
    if unknown:
        return (f"settle {', '.join(unknown)} first (reconcile): whether its effect happened "
                "decides whether sending it again with a new key does it twice")
    if any(s.status == StepStatus.COMPENSATING for s in steps):
        return f"run {run.pk} is being compensated: let the compensation finish first"
    return None


