"""Durable timers: a sleep step puts its run to sleep until a time, holding no process.

The run waits with next_wake_at set to the time (the sweeper's run_wake_due_idx finds it
when due); the step waits with next_attempt_at the same. When a worker claims the run at or
after that time, the step succeeds and the run goes on, in the same transition. A person
may wake it early, with a reason (wake_timer): the step's time becomes now.
"""

from datetime import datetime

from audit.actions import AuditAction
from audit.chain import Actor

from ...definitions import definition
from ...models import Run, Step, StepStatus
from .kernel import QUEUED, WAITING, Change, Lease, audit_state, definition_step
from .operator import operator_transition


def wake_time(spec: definition.StepDef, run: Run, now: datetime) -> datetime:
    if spec.sleep_for is not None:
        return now + spec.sleep_for
    until = spec.sleep_until(run.input)
    if not isinstance(until, datetime) or until.tzinfo is None:
        raise ValueError(f"sleep {spec.name!r}: until() must return an aware datetime, "
                         f"not {until!r}")
    return until


def sleeps(change: Change, lease: Lease, step: Step) -> bool:
    """Put the run to sleep on `step` if its time has not come (True), or say it has come
    (False: the caller records the step's success and goes on)."""
    run, now = change.run, change.now
    if step.status != StepStatus.WAITING or step.next_attempt_at is None:
        wake_at = wake_time(definition_step(lease, step), run, now)
        if wake_at <= now:
            return False
        before = audit_state(run, step)
        step.status = StepStatus.WAITING
        step.started_at = step.started_at or now
        step.next_attempt_at = wake_at
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
        change.audit(AuditAction.TIMER_STARTED, step=step, before=before,
                     after={"step_status": step.status}, data={"until": wake_at.isoformat()})
    elif step.next_attempt_at <= now:
        return False
    change.move(WAITING, message=sleeping_message(step))
    run.next_wake_at = step.next_attempt_at
    lease.finished, lease.work = True, None
    return True


def sleeping_message(step: Step) -> str:
    return f"{step.name}: sleeping until {step.next_attempt_at:%Y-%m-%d %H:%M:%S %Z}"


def sleeping_step(steps: list[Step]) -> Step | None:
    """The sleep step a waiting run sleeps on, if it does."""
    return next((s for s in steps if s.kind == definition.SLEEP and s.status == StepStatus.WAITING),
                None)


def wake_timer(run_id: int, *, actor: Actor, reason: str, now: datetime | None = None) -> Run:
    """Wake a run sleeping on a timer now, before its time; the sleep step then succeeds at
    the next claim and the run goes on."""
    with operator_transition(run_id, "wake_timer", actor=actor, reason=reason,
                             now=now) as op:
        run, change = op.run, op.change
        step = sleeping_step(op.steps)
        before = audit_state(run, step)
        planned = step.next_attempt_at
        step.next_attempt_at = change.now
        change.step_changed(step)
        run.next_wake_at = None
        change.move(QUEUED)
        change.audit(AuditAction.TIMER_WOKEN, step=step, reason=reason, before=before,
                     after=audit_state(run, step),
                     data={"planned": planned.isoformat() if planned else None})
    return run
