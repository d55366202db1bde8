"""Sending an effect again (a step's call, a tool call, a step's undo): the one place that
counts the attempt against the effect's budget and applies its backoff, and the one way the
lease holder lets a run go until an effect is due again."""

from datetime import datetime, timedelta

from ...models import StepStatus
from .kernel import (  # the package's shared vocabulary
    MAX_HINT_COUNTDOWN,
    WAITING,
    Change,
    Lease,
    audit_state,
)


def schedule_resend(change: Change, lease: Lease, effect, *, before: dict, why: str,
                    error: str, retry_after: float | None = None, action: str = "",
                    data: dict | None = None) -> str | None:
    """Schedule one more sending of `effect` (an effects.StepEffect or CallEffect), if its
    budget allows.

    Every path that sends an effect again comes through here: a retry after a transient
    error, a resend after a lookup by key found nothing, a resend to a receiver that honours
    keys without a lookup, and an undo tried again. The attempt counts against the effect's
    budget (attempts and elapsed time, its spec's RetryPolicy) and the next one waits out
    its backoff. Returns None once the resend is scheduled, or, with nothing scheduled, the
    sentence that says the budget is spent: the caller stops the run for a person with it.
    """
    now = change.now
    policy = effect.spec.retry
    attempts = effect.attempts_in_budget
    started = effect.budget_started_at
    elapsed = (now - started).total_seconds() if started else 0
    delay = policy.delay(attempts, retry_after=retry_after)
    effect.release()
    if not policy.allows_another(attempts_made=attempts, elapsed=elapsed, next_delay=delay):
        # After a person's retry (or an agent's wait for a tool call) the budget begins
        # again: the count said is the budget's, and the attempts before it are told apart.
        earlier = effect.attempts_in_all - attempts
        return (f"retry budget spent after {attempts} attempt{'s' if attempts != 1 else ''} "
                + (f"since it began again ({attempts + earlier} in all) " if earlier > 0
                   else "") + f"({why}); last error: {error}")
    at = now + timedelta(seconds=delay)
    if not effect.undo:
        effect.row.status = StepStatus.SCHEDULED
    effect.row.next_attempt_at = at
    release_until(change, lease, effect, at,
                  message=f"{effect.name}: sent again at {at:%H:%M:%S} ({why})")
    change.audit(action or effect.resend_action, step=effect.step, before=before,
                 after=audit_state(change.run, effect.step),
                 data=effect.data(**(data or {}), why=why, error=error, attempt=attempts,
                                  delay_seconds=round(delay, 3)))
    return None


def release_until(change: Change, lease: Lease, effect, at: datetime, *, message: str) -> None:
    """Release the run until `at`, when the sweeper (or a wake-up hint) brings it back to
    the effect: the run waits, or, for an undo, stays compensating without a lease."""
    run = change.run
    effect.wait_until(change, at)
    if effect.undo:
        run.lease_owner, run.lease_expires_at = "", None
    else:
        change.move(WAITING, message=message)
    run.next_wake_at = at
    wait = (at - change.now).total_seconds()
    if wait <= MAX_HINT_COUNTDOWN:
        change.wake_countdown = max(wait, 0.0)
    lease.finished, lease.work = True, None


# Far beyond the error of the clock estimate (store.current().now()), far below any wait a
# person or a policy sets.
DUE_AT_ONCE_SLACK = timedelta(seconds=1)


def due_at_once(now: datetime) -> datetime:
    """The wake-up time of a run that is to go on at once. `now` is the database's clock as
    this process estimates it, and a claim judges due-ness by the database's own: set to
    `now`, a run could be a few milliseconds early there, and the claim its wake-up hint
    triggers would find it not yet due (the sweeper would take it a pass later)."""
    return now - DUE_AT_ONCE_SLACK
