"""Sending a step, or its compensation, again: the one place that counts the attempt against
the step's budget and applies its backoff."""

from datetime import timedelta

from audit.actions import AuditAction

from ..models import (
    Step,
    StepStatus,
)
from .kernel import (  # the package's shared vocabulary
    _MAX_HINT_COUNTDOWN,
    Lease,
    W,
    _Change,
    _definition_step,
    _snapshot,
)


def schedule_resend(change: _Change, lease: Lease, step: Step, *, before: dict, why: str,
                    error: str, retry_after: float | None = None, compensation: bool = False,
                    action: str = "", data: dict | None = None) -> str | None:
    """Schedule one more sending of `step` (or of its compensation), if its budget allows.

    Every path that sends a step again comes through here: a retry after a transient error,
    a resend after a lookup by key found nothing, a resend to a receiver that honours keys
    without a lookup, and a compensation tried again. The attempt counts against the step's
    budget (attempts and elapsed time) and the next one waits out the step's backoff.
    Returns None once the resend is scheduled, or, with nothing scheduled, the sentence that
    says the budget is spent: the caller stops the run for a person with it.
    """
    run, now = change.run, change.now
    policy = _definition_step(lease, step).retry
    attempts = (step.compensation_attempt if compensation
                else step.attempt - step.budget_attempt_base)
    elapsed = (now - step.budget_started_at).total_seconds() if step.budget_started_at else 0
    delay = policy.delay(attempts, retry_after=retry_after)
    step.lease_owner, step.lease_expires_at = "", None
    if not policy.allows_another(attempts_made=attempts, elapsed=elapsed, next_delay=delay):
        return (f"retry budget spent after {attempts} attempt{'s' if attempts != 1 else ''} "
                f"({why}); last error: {error}")
    step.next_attempt_at = now + timedelta(seconds=delay)
    if compensation:
        # The run stays compensating, released until the retry is due.
        run.lease_owner, run.lease_expires_at = "", None
    else:
        step.status = StepStatus.SCHEDULED
        change.move(W)
    change.step_changed(step)
    run.next_wake_at = step.next_attempt_at
    change.audit(action or (AuditAction.COMPENSATION_RETRY_SCHEDULED if compensation
                             else AuditAction.RETRY_SCHEDULED),
                 step=step, before=before, after=_snapshot(run, step),
                 data={**(data or {}), "why": why, "error": error, "attempt": attempts,
                       "delay_seconds": round(delay, 3)})
    if delay <= _MAX_HINT_COUNTDOWN:
        change.wake_countdown = delay
    lease.finished, lease.work = True, None
    return None
