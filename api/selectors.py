"""Reads for the API: a run as a caller sees it, in two queries (the run, its steps)."""

from dataclasses import dataclass

from archive.models import ArchivedRun
from runs.actions import offered
from runs.models import Run, RunStatus, Step, StepStatus

# The run statuses of the runtime, as the finite set of states the API promises.
STATE_OF_STATUS = {
    RunStatus.QUEUED: "accepted",
    RunStatus.RUNNING: "running",
    RunStatus.WAITING: "waiting",
    RunStatus.ATTENTION: "needs_attention",
    RunStatus.COMPENSATING: "compensating",
    RunStatus.COMPLETED: "completed",
    RunStatus.COMPENSATED: "compensated",
    RunStatus.COMPENSATION_FAILED: "compensation_failed",
    RunStatus.TERMINATED: "terminated",
}


def state_of(status: str) -> str:
    return STATE_OF_STATUS[RunStatus(status)]


@dataclass(frozen=True)
class RunView:
    run: Run
    state: str
    description: str
    current: Step | None
    waiting_for: str | None
    last_error: Step | None
    # What an operator can do with the run now (from runs.actions, the one table).
    operator_actions: list
    steps: list[Step]


def visible_run(run_id: int, *, workflows: list[str]) -> Run | None:
    """The run, if it is one of `workflows`' (a token never learns that other runs exist)."""
    return Run.objects.filter(pk=run_id, workflow_name__in=workflows).first()


def visible_archived_run(run_id: int, *, workflows: list[str]) -> ArchivedRun | None:
    """The tombstone of archived run `run_id`, if it is one of `workflows`'."""
    return (ArchivedRun.objects.select_related("archive_file")
            .filter(original_run_id=run_id, workflow_name__in=workflows).first())


def run_view(run: Run) -> RunView:
    steps = list(Step.objects.filter(run=run).order_by("position"))
    current = next((s for s in steps if s.name == run.current_step), None) \
        if run.current_step else None
    errored = [s for s in steps if s.error_class]
    last_error = max(errored, key=lambda s: (s.updated_at, s.position)) if errored else None
    state = state_of(run.status)
    waiting_for = None
    if state == "waiting":
        waiting_for = "approval" if current is not None and (
            current.kind == "approval" and current.status == StepStatus.WAITING) else "retry"
    return RunView(run=run, state=state, current=current, waiting_for=waiting_for,
                   last_error=last_error, operator_actions=offered(run, steps), steps=steps,
                   description=_describe(run, state, current, waiting_for))


def _describe(run: Run, state: str, current: Step | None, waiting_for: str | None) -> str:
    where = (f"step {current.position + 1} of {run.step_count} ({current.name})"
             if current is not None else "")
    if state == "accepted":
        return "accepted; waiting for a worker" + (f" to run {where}" if where else "")
    if state == "running":
        return f"running {where}" if where else "running"
    if state == "waiting":
        if waiting_for == "approval":
            return f"waiting for approval at {where}"
        return f"waiting to retry {where}" if where else "waiting to retry"
    if state == "needs_attention":
        return f"needs attention: {run.get_attention_reason_display() or 'unspecified'}" + (
            f" at {where}" if where else "")
    if state == "compensating":
        return f"compensating {where}" if where else "compensating"
    if state == "compensation_failed":
        return f"compensation failed at {where}; needs attention" if where \
            else "compensation failed; needs attention"
    return {"completed": f"completed all {run.step_count} steps",
            "compensated": "compensated: completed steps were undone",
            "terminated": "terminated"}[state]
