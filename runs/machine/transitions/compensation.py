"""Compensation: the plan (completed steps that declare an undo, newest first), starting it,
the next undo's intent, and the one pause before a high-impact undo, a step's or an agent's
tool call's (pauses_before_undo). An undo's outcome is an effect's outcome
(effects.undo_outcome)."""

from collections.abc import Callable

from audit.actions import AuditAction

from ...definitions import definition
from ...models import (
    AttentionReason,
    Step,
    StepStatus,
)
from .effect_rows import Effect, StepEffect
from .in_flight import compensation_order, undo_held
from .kernel import (  # the package's shared vocabulary
    ATTENTION,
    CFAIL,
    COMP,
    COMPED,
    Change,
    Lease,
    audit_state,
    end_waits,
)


def compensation_plan(steps: list[Step], workflow_def: definition.Workflow | None) -> list[Step]:
    """The steps a compensation would undo, in the order it would undo them: completed steps
    that declared a compensation (and failed compensations, tried again), newest first.

    Declared when the run started: the step's row got its compensation key then. A release
    that removed the undo since leaves the step in the plan, and the compensation stops
    there for a person (advance_compensation) rather than passing over an effect that
    stands; one that added an undo since does not send it, keyless, under this run."""
    if workflow_def is None:
        return []
    plan = [s for s in steps if s.compensation_key and s.status in STANDS]
    plan += agents_with_undos_to_come(
        [s for s in steps if s.compensation_key and s.kind == definition.AGENT
         and s.status not in STANDS and s.status != StepStatus.RUNNING])
    return sorted(plan, key=lambda s: (s.finished_at or s.updated_at, s.position), reverse=True)


STANDS = (StepStatus.SUCCEEDED, StepStatus.COMPENSATING, StepStatus.COMPENSATION_FAILED)


def agents_with_undos_to_come(agents: list[Step]) -> list[Step]:
    """Of agent steps that did not end well (failed, cancelled, ended by a person, waiting),
    those with a call whose effect stands and declared an undo: an agent's effects are its
    calls', whatever the step's own end, and a compensation undoes them too (the calls
    in_flight.compensation_order gives, as undone_by_calls weighs them). Reads what a
    list page prefetched (step.tool_calls), or one query per such step."""
    return [s for s in agents if compensation_order(
        [c for c in s.tool_calls.all() if c.generation == s.generation])]


def begin_compensation(change: Change, plan: list[Step], steps: list[Step], *, reason: str,
                        data: dict | None = None) -> None:
    before = audit_state(change.run)
    # A run being undone waits for nothing that would send it forward.
    end_waits(change, steps, kinds=(definition.EVENT, definition.SLEEP))
    for step in plan:
        if step.status == StepStatus.COMPENSATION_FAILED:
            step.status = StepStatus.COMPENSATING  # tried again with the same key
            # Due at once: its last try was answered (it failed, or a run's end left its
            # outcome unknown and says so), so it is no undo in flight
            # (in_flight.undo_unanswered) until its next intent.
            step.next_attempt_at = change.now
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
    step = next_undo(lease)
    if step is None:
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
    if step.kind != definition.AGENT and undo_of(lease.definition, step.name) is None:
        hold_undo_missing(change, lease, step, f"{step.name}: {run.workflow_name} "
                                               f"v{run.workflow_version} in this worker "
                                               "declares no undo for this step, whose effect "
                                               "stands")
        return
    if pauses_before_undo(change, lease, StepEffect(lease, step),
                          waiting=lambda: [s.name for s in undos_to_come(lease)]):
        return
    if step.status != StepStatus.COMPENSATING:
        step.budget_started_at = now  # the compensation's own retry budget starts now
    step.budget_started_at = step.budget_started_at or now
    step.next_attempt_at = None
    step.lease_owner, step.lease_expires_at = lease.worker, run.lease_expires_at
    run.current_step = step.name
    StepEffect(lease, step).undo_begun(change)
    lease.work, lease.compensating = step, True


def undo_of(workflow_def: definition.Workflow | None, step_name: str):
    """The undo the running code declares for step `step_name`, or None."""
    spec = definition.step_of(workflow_def, step_name)
    return spec.compensate_fn if spec is not None else None


def hold_undo_missing(change: Change, lease: Lease, step: Step, message: str) -> None:
    """The undo an effect that stands needs is gone from the code (a release removed it, or
    its tool, without a new version): nothing more is undone, and the compensation waits
    for a person as failed, naming the effect. With the undo back, compensating again goes
    on where it stopped. Nothing is in flight while it waits, so the step it stops at (and,
    for an agent step, its calls) is not left compensating, which the run page and the API
    would read as an undo under way: each says what stands (in_flight.undo_held, by the
    rule a run a person ends follows too; an undo its dead worker sent and never had
    answered is in doubt)."""
    run = change.run
    before = audit_state(run, step)
    changed = bool(step.lease_owner)  # an agent step held the lease for its calls' undos
    step.lease_owner, step.lease_expires_at = "", None
    undone, held_calls = undo_held(change, step)
    calls = {call.ref: call.status for call in held_calls}
    if undone or changed:
        change.step_changed(step)
    change.move(CFAIL, reason=AttentionReason.DEFINITION_MISSING, message=message)
    change.audit(AuditAction.DEFINITION_MISSING, step=step, before=before,
                 after=audit_state(run, step),
                 data={"error": message, **({"tool_calls": calls} if calls else {})})
    lease.finished, lease.work, lease.compensating = True, None, False


def undos_to_come(lease: Lease) -> list[Step]:
    """The steps whose undo is still to come, the next one first (a failed undo waits for a
    person to compensate again)."""
    return [s for s in compensation_plan(lease.steps, lease.definition)
            if s.status != StepStatus.COMPENSATION_FAILED]


def next_undo(lease: Lease) -> Step | None:
    """The first of undos_to_come, without building the plan again at every undo (a pass
    over every step, sorted: 1,000 undos took 32 s). The plan is worked out once for the
    lease's step rows (Lease.undo_order, again if they are read anew) and walked from its
    newest end: a step leaves it once undone, and none joins it while the run is
    compensated (nothing runs forward), so the next undo is the first step still in it."""
    if lease.undo_order is None or lease.undo_order[0] is not lease.steps:
        plan = compensation_plan(lease.steps, lease.definition)
        lease.undo_order = (lease.steps, plan[::-1])  # the next undo last, taken off there
    order = lease.undo_order[1]
    while order and not still_to_undo(order[-1]):
        order.pop()
    return order[-1] if order else None


def still_to_undo(step: Step) -> bool:
    """Whether a step of the plan is still in undos_to_come, as compensation_plan judges it."""
    if not step.compensation_key or step.status == StepStatus.COMPENSATION_FAILED:
        return False
    if step.status in STANDS:
        return True
    return step.kind == definition.AGENT and step.status != StepStatus.RUNNING \
        and bool(agents_with_undos_to_come([step]))


def asks_a_person(row) -> bool:
    """Whether the undo of `row` (a step, or one tool call) waits for a person to confirm it
    before it is sent: the rule pauses_before_undo stops by and a preview shows."""
    # An agent step's undo is its tool calls' undos: each of them is weighed on its own.
    if row.kind == definition.AGENT or row.impact != definition.HIGH:
        return False
    # Compensating (or failed, and compensating again): a person confirmed it, or it was
    # sent and is sent again with its key; either way nobody is asked twice.
    return row.status == StepStatus.SUCCEEDED


def pauses_before_undo(change: Change, lease: Lease, effect: Effect, *,
                       waiting: Callable[[], list[str]]) -> bool:
    """Whether the compensation stops before the undo of `effect` (a step, or one tool call of
    an agent step) until a person confirms it (operator.confirm_compensation). If it does,
    the stop is recorded here: the run in attention naming the undo, and the undos that wait
    behind it (`waiting()`, this one first, asked only then) in the record. The one rule for
    both kinds."""
    row, step, run = effect.row, effect.step, change.run
    if not asks_a_person(row):
        return False
    # Undoing a high-impact effect sends something that cannot be taken back (a correction
    # to a person, a reversing entry): prepared and shown, sent only once a person confirms.
    before = audit_state(run, step)
    run.current_step = step.name
    if step.lease_owner:  # an agent step held the lease for its calls' undos
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
    change.move(ATTENTION, reason=AttentionReason.COMPENSATION_PAUSED,
                message=f"compensation paused before undoing {effect.name} (high impact): "
                        "confirm what it will send to carry on")
    change.audit(AuditAction.COMPENSATION_PAUSED, step=step, before=before,
                 after=audit_state(run, step), data=effect.data(waiting=waiting()))
    lease.finished, lease.work, lease.compensating = True, None, False
    return True
