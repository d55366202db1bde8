"""The lease holder settles an unknown outcome: the step's effect looked up by its key
(found settles it, not found lets it be sent again through the one resend path, a lookup
that cannot tell is asked again within the lookup budget, then a person decides)."""

from datetime import datetime, timedelta

from audit.actions import AuditAction
from audit.chain import Actor

from .. import definition as d
from .. import store
from ..models import (
    AttentionReason,
    Step,
)
from .kernel import (  # the package's shared vocabulary
    _MAX_HINT_COUNTDOWN,
    A,
    Lease,
    W,
    _Change,
    _definition_step,
    _extend_lease,
    _fenced,
    _lock,
    _now,
    _snapshot,
)
from .lease_cycle import _advance, _resend_or_stop, _succeed


def settle_unknown(lease: Lease, step: Step, verdict, *, error: str = "",
                   now: datetime | None = None) -> Lease:
    """Settle the lease holder's unknown step with what reconciliation found.

    Found: the effect happened (the key is the evidence, whatever the impact); the step
    succeeds with its remote reference. LookupFailed: the lookup itself erred; it is a read,
    so it is asked again with backoff until the step's lookup budget is spent. NotFound, or
    no lookup but a receiver that honours keys: a low-impact step is sent again with the
    same key, as a counted, backed-off attempt (see _send_again); a high-impact step waits
    for a person. Undetermined (or no way to ask): a person must settle it.
    """
    now = _now(now)
    spec = _definition_step(lease, step)
    with store.current().transaction():
        run = _lock(lease.run.pk)
        if _fenced(run, lease):
            lease.finished, lease.work = True, None
            return lease
        change = _Change(run, "settle_unknown", Actor.system(lease.worker), now)
        lease.run = run
        _extend_lease(run, now)
        before = _snapshot(run, step)
        if isinstance(verdict, d.Found):
            step.lookup_failures = 0
            _succeed(change, lease, step, verdict.result, verdict.ref, AuditAction.RECONCILED,
                     data={"verdict": "found"})
            _advance(change, lease)
        elif isinstance(verdict, d.LookupFailed):
            _lookup_failed(change, lease, step, spec, before, verdict)
        elif (spec.impact == d.LOW and isinstance(verdict, d.NotFound)
              and not spec.honours_key and _too_early_to_trust(step, spec, now)):
            # The receiver ignores keys and the request may still be in flight: "not found"
            # now proves nothing. Look again once it has had time to land.
            # Measured from the first "not found": a second lookup before then changes nothing.
            at = step.next_attempt_at or now + timedelta(seconds=spec.lookup_delay)
            _look_again(change, lease, step, before, at=at,
                        message=f"{step.name}: not found yet; looking again before sending "
                                "again", data={"verdict": "not found yet"})
        elif spec.impact == d.LOW and (isinstance(verdict, d.NotFound)
                                       or (verdict is None and spec.honours_key)):
            step.lookup_failures = 0
            why = ("lookup by key found nothing" if verdict is not None else
                   "no lookup; the receiver deduplicates on the key")
            _resend_or_stop(change, lease, step, before=before, why=why,
                            error=step.error_message or error, action=AuditAction.RECONCILED,
                            data={"verdict": "not found" if verdict is not None
                                  else "cannot ask", "then": "send again with the same key"})
        else:
            if isinstance(verdict, d.NotFound):
                why = "reconciliation found no effect, but a high-impact step is sent again " \
                      "only after a person confirms"
                label = "not found"
            elif verdict is None:
                why = ("no reconcile function, and a high-impact step is not resent without "
                       "a person" if spec.honours_key else
                       "no reconcile function and the receiver does not honour keys")
                label = "cannot ask"
            else:
                why = f"reconciliation could not tell: {verdict.reason or error}"
                label = "undetermined"
            change.move(A, reason=AttentionReason.UNKNOWN_OUTCOME, message=f"{step.name}: {why}")
            change.audit(AuditAction.ATTENTION, step=step,
                         before=before, after=_snapshot(run, step),
                         data={"verdict": label, "error": error})
            lease.finished, lease.work = True, None
        change.save()
    return lease

def _lookup_failed(change: _Change, lease: Lease, step: Step, spec: d.StepDef, before: dict,
                   verdict: d.LookupFailed) -> None:
    """A lookup by key erred: ask again with the step's backoff, or, once its lookup budget
    is spent, stop for a person saying how many lookups failed and how."""
    step.lookup_failures += 1
    failures = step.lookup_failures
    if failures < spec.lookup_attempts:
        _look_again(change, lease, step, before,
                    at=change.now + timedelta(seconds=spec.retry.delay(failures)),
                    message=f"{step.name}: lookup by key failed ({failures} of "
                            f"{spec.lookup_attempts}); asking again",
                    data={"verdict": "lookup failed", "error": verdict.reason,
                          "lookup_failures": failures}, action=AuditAction.LOOKUP_RETRY_SCHEDULED)
        return
    change.step_changed(step)
    change.move(A, reason=AttentionReason.UNKNOWN_OUTCOME,
                message=f"{step.name}: {failures} lookup{'s' if failures != 1 else ''} by key "
                        f"failed, the last with: {verdict.reason}; the outcome is still "
                        "unknown")
    change.audit(AuditAction.ATTENTION, step=step, before=before, after=_snapshot(change.run, step),
                 data={"verdict": "lookup failed", "error": verdict.reason,
                       "lookup_failures": failures})
    lease.finished, lease.work = True, None

def _look_again(change: _Change, lease: Lease, step: Step, before: dict, *, at: datetime,
                message: str, data: dict, action: str = AuditAction.RECONCILE_SCHEDULED) -> None:
    """Release the run until the step's effect is looked up again at `at` (the step stays
    unknown: nothing is sent before the lookup)."""
    run, now = change.run, change.now
    step.next_attempt_at = at
    change.step_changed(step)
    change.move(W, message=message)
    run.next_wake_at = step.next_attempt_at
    change.audit(action, step=step, before=before, after=_snapshot(run, step),
                 data={**data, "recheck_at": step.next_attempt_at.isoformat()})
    wait = (step.next_attempt_at - now).total_seconds()
    if wait <= _MAX_HINT_COUNTDOWN:
        change.wake_countdown = max(wait, 0.0)
    lease.finished, lease.work = True, None

def _too_early_to_trust(step: Step, spec: d.StepDef, now: datetime) -> bool:
    return spec.lookup_delay > 0 and (step.next_attempt_at is None
                                      or step.next_attempt_at > now)
