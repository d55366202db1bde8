"""Compensation: the plan (completed steps that declare an undo, newest first), starting it,
and the next undo's intent (pausing before a high-impact one). An undo's outcome is an
effect's outcome (effects.undo_outcome)."""

from audit.actions import AuditAction

from ...definitions import definition
from ...models import (
    AttentionReason,
    Step,
    StepStatus,
)
from .effect_rows import StepEffect
from .kernel import (  # the package's shared vocabulary
    ATTENTION,
    COMP,
    COMPED,
    Change,
    Lease,
    audit_state,
)


def compensation_plan(steps: list[Step], workflow_def: definition.Workflow | None) -> list[Step]:
    """The steps a compensation would undo, in the order it would undo them: completed steps
    that declare a compensation (and failed compensations, tried again), newest first."""
    if workflow_def is None:
        return []
    known = {s.name for s in workflow_def.steps if s.compensate_fn is not None}
    plan = [s for s in steps if s.name in known and s.status in (
        StepStatus.SUCCEEDED, StepStatus.COMPENSATING, StepStatus.COMPENSATION_FAILED)]
    return sorted(plan, key=lambda s: (s.finished_at or s.updated_at, s.position), reverse=True)

def begin_compensation(change: Change, plan: list[Step], *, reason: str,
                        data: dict | None = None) -> None:
    before = audit_state(change.run)
    for step in plan:
        if step.status == StepStatus.COMPENSATION_FAILED:
            step.status = StepStatus.COMPENSATING  # tried again with the same key
            step.next_attempt_at = None
            step.budget_started_at = None
            change.step_changed(step)
    change.move(COMP)
    change.audit(AuditAction.COMPENSATION_STARTED, reason=reason, before=before,
                 after=audit_state(change.run),
                 data={**(data or {}), "order": [s.name for s in plan]})

def advance_compensation(change: Change, lease: Lease) -> None:
    """Record the intent of the next compensation (newest completed step first), or finish."""
    run, now = change.run, change.now
    lease.work, lease.settle_first, lease.compensating = None, False, False
    plan = [s for s in compensation_plan(lease.steps, lease.definition)
            if s.status != StepStatus.COMPENSATION_FAILED]
    if not plan:
        before = audit_state(run)
        for step in lease.steps:
            if step.status in (StepStatus.PENDING, StepStatus.SCHEDULED):
                step.status = StepStatus.SKIPPED
                change.step_changed(step)
        change.move(COMPED)
        run.current_step = ""
        change.audit(AuditAction.COMPENSATED, before=before, after=audit_state(run))
        lease.finished = True
        return
    step = plan[0]
    if step.impact == definition.HIGH and step.status == StepStatus.SUCCEEDED:
        # Undoing a high-impact effect sends something that cannot be taken back (a
        # correction to a person, a reversing entry): prepared and shown, sent only once a
        # person confirms (confirm_compensation); older undos wait behind it.
        before = audit_state(run, step)
        run.current_step = step.name
        change.move(ATTENTION, reason=AttentionReason.COMPENSATION_PAUSED,
                    message=f"compensation paused before undoing {step.name} (high impact): "
                            "confirm what it will send to carry on")
        change.audit(AuditAction.COMPENSATION_PAUSED, step=step, before=before,
                     after=audit_state(run, step),
                     data={"waiting": [s.name for s in plan]})
        lease.finished = True
        return
    if step.status == StepStatus.SUCCEEDED:
        step.budget_started_at = now  # the compensation's own retry budget starts now
    step.budget_started_at = step.budget_started_at or now
    step.next_attempt_at = None
    step.lease_owner, step.lease_expires_at = lease.worker, run.lease_expires_at
    run.current_step = step.name
    StepEffect(lease, step).undo_begun(change)
    lease.work, lease.compensating = step, True
