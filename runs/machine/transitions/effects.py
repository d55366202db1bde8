"""The one effect machine: the rules every effect in another system goes through, whether it
is a step's call or one tool call of an agent step (and the undo of a step).

An effect is seen through an adapter (effect_rows.StepEffect or CallEffect): its row, a Step
or a ToolCall with the same field names; its spec, the StepDef or the ToolSpec (impact,
retry policy, lookup); the step that holds it; and how it is saved. Each rule is written
once, for both kinds: the intent checkpoint (EffectRow.begun), the outcome checkpoint
(succeed), error classification (fail), the one resend path with its budget and backoff
(resend_or_stop, over resends.schedule_resend), an unknown outcome looked up by key within
the lookup budget (settle), stopping for a person or undoing by policy (stop, halt),
settlement and a resend by a person (settled_by_person, sent_again_by_person), the wait for
a person's approval before an attempt and their decision (held_for_approval,
decided_by_person), and an undo's outcome (undo_outcome, over EffectRow.undone and
undo_failed; an agent step's failed undo fails its call's, in_flight.calls_not_undone). An
outcome that arrives once its run has moved on (a fenced-off worker's late result) is
late_outcomes'. The transitions (lease_cycle, unknown_outcome, agent_calls, approval_waits,
operator, agent_operator) lock the run, build the adapter and call these inside their
change.
"""

from datetime import timedelta

from audit.actions import AuditAction
from audit.redaction import redact, redact_text

from ...definitions import definition
from ...models import AttentionReason, ErrorClass, Step, StepStatus
from .compensation import advance_compensation, begin_compensation, compensation_plan
from .effect_rows import FAILED, PENDING, SUCCEEDED, UNKNOWN, CallEffect, Effect, StepEffect
from .in_flight import calls_due_again, calls_not_undone
from .kernel import (  # the package's shared vocabulary
    ATTENTION,
    CFAIL,
    QUEUED,
    WAITING,
    Change,
    Lease,
    Outcome,
    audit_state,
)
from .lookup_verdicts import not_found_trusted_from, still_unknown_reason
from .resends import release_until, schedule_resend


def succeed(change: Change, effect: Effect, value, remote_ref: str, action: str,
            **data) -> None:
    """The effect happened: its result and remote reference stored, its errors cleared."""
    row = effect.row
    before = row.status
    stands(change, effect, value, remote_ref)
    effect.release()
    effect.save(change)
    effect.succeeded(change, before)
    change.audit(action, step=effect.step, before={effect.status_key: before},
                 after={effect.status_key: row.status, "remote_ref": row.remote_ref},
                 data=effect.data(**data) or None)


def stands(change: Change, effect: Effect, value, remote_ref: str, *,
           keep_result: bool = False) -> None:
    """The effect's row says it happened: its result (with `keep_result`, a None value
    keeps the one it has) and remote reference stored, its errors and lookups cleared."""
    row = effect.row
    row.status = SUCCEEDED
    if not (keep_result and value is None):
        row.result = effect.sealed(value)
    # Whole: what a call or a lookup returned was refused before this when too long to keep
    # (outcome.reference_too_long), and so was a person's verdict (runs.operator.actions).
    row.remote_ref = str(remote_ref or "")
    row.error_class, row.error_message = "", ""
    row.lookup_failures = 0
    row.finished_at = change.now


# What a sealed value that could not be opened left behind (fail): said after its error.
NOTHING_SENT = "nothing that needs it was sent"
MAY_HAVE_SENT = ("its code ran and may have sent before it read the value: look it up by "
                 "its key once the key is back")


def fail(change: Change, lease: Lease, effect: Effect, outcome: Outcome) -> bool:
    """Apply a classified error to the effect and decide what the run does next. True when
    the caller goes on to the next piece of work (a rejected model output, within budget)."""
    error, row, spec, run = outcome.error, effect.row, effect.spec, change.run
    before = audit_state(run, effect.step)
    row.error_class, row.error_message = error.error_class, error.message
    effect.release()
    cls = error.error_class
    if cls == ErrorClass.UNKNOWN and not spec.has_side_effect:
        cls = ErrorClass.TRANSIENT  # nothing to duplicate: a read is simply tried again
    if cls == ErrorClass.MODEL_FORMAT and effect.format_budget is not None:
        return _rejected_output(change, lease, effect, outcome, before)
    if cls == ErrorClass.TRANSIENT:
        resend_or_stop(change, lease, effect, before=before, why="transient error",
                       error=error.message, retry_after=error.retry_after)
    elif cls in (ErrorClass.PERMANENT, ErrorClass.KEY_REUSED):
        row.status = FAILED
        effect.save(change)
        stop(change, lease, effect, before, AttentionReason.PERMANENT_ERROR, error.message,
             error.message)
    elif cls == ErrorClass.UNREADABLE:
        # A sealed value could not be opened (errors.classify). Opened by the runtime before
        # the effect (a tool call's arguments, an agent's conversation), nothing was sent:
        # failed. Opened by the code of an effect that acts elsewhere (an earlier result it
        # reads), it may have sent before it read: unknown, to be looked up once the key is
        # back. Held either way for the key, never undone by policy.
        acted = row.status == StepStatus.RUNNING and spec.has_side_effect
        row.status = UNKNOWN if acted else FAILED
        effect.save(change)
        said = f"{error.message}; {MAY_HAVE_SENT if acted else NOTHING_SENT}"
        halt(change, lease, effect, before, reason=AttentionReason.SEALED_VALUE_UNREADABLE,
             message=said, data={"error": said})
    elif cls == ErrorClass.UNKNOWN:
        # It may have happened. Never relabel it failed: it is looked up by key before
        # anything else is written.
        row.status = UNKNOWN
        effect.save(change)
        change.audit(AuditAction.OUTCOME_UNKNOWN, step=effect.step, before=before,
                     after=audit_state(run, effect.step), data=effect.data(error=error.message))
        effect.settle_next(lease)
    else:
        # Unclassified: an effect that may have acted elsewhere may have acted.
        row.status = UNKNOWN if spec.has_side_effect else FAILED
        row.error_class = ErrorClass.UNCLASSIFIED
        effect.save(change)
        halt(change, lease, effect, before, reason=AttentionReason.UNCLASSIFIED_ERROR,
             message=error.message, data={"error": error.message})
    return False


def _rejected_output(change: Change, lease: Lease, effect: Effect, outcome: Outcome,
                     before: dict) -> bool:
    """A model's output that failed its schema: asked again within the small format budget
    (the invalid output kept for diagnosis), then a person."""
    row, error = effect.row, outcome.error
    row.format_failures += 1
    row.result = {"invalid_output": redact(outcome.invalid_output)}
    if row.format_failures <= effect.format_budget:
        row.status = StepStatus.PENDING
        effect.save(change)
        change.audit(AuditAction.MODEL_OUTPUT_REJECTED, step=effect.step, before=before,
                     after=audit_state(change.run, effect.step),
                     data={"error": error.message, "failures": row.format_failures})
        return True
    row.status = FAILED
    effect.save(change)
    halt(change, lease, effect, before, reason=AttentionReason.MODEL_OUTPUT_PAUSED,
         message=f"model output failed its schema {row.format_failures} times",
         data={"error": error.message})
    return False


def resend_or_stop(change: Change, lease: Lease, effect: Effect, *, before: dict,
                   **resend) -> None:
    """Send the effect again if its budget allows (resends.schedule_resend), else fail it as
    exhausted (each attempt had evidence that nothing changed) and stop."""
    spent = schedule_resend(change, lease, effect, before=before, **resend)
    if spent is None:
        return
    effect.row.status = FAILED
    effect.row.error_class = ErrorClass.EXHAUSTED
    effect.save(change)
    stop(change, lease, effect, before, AttentionReason.BUDGET_EXHAUSTED, spent,
         resend["error"])


def stop(change: Change, lease: Lease, effect: Effect, before: dict, reason: str,
         message: str, error: str) -> None:
    """An effect failed with evidence that nothing changed: undo the completed steps where
    the workflow's policy allows it, otherwise stop for a person. An automatic compensation
    undoes only low-impact steps by itself: it pauses for a person at any high-impact undo
    (compensation.advance_compensation)."""
    # Stopped first: an agent step stops with its call, and then joins the plan with the
    # calls of it whose effects stand.
    effect.stopped(change, message)
    plan = compensation_plan(lease.steps, lease.definition)
    automatic = (lease.definition.auto_compensate and plan
                 and not any(s.status == StepStatus.UNKNOWN for s in lease.steps))
    if not automatic:
        halt(change, lease, effect, before, reason=reason, message=message,
             data={"error": error})
        return
    change.audit(AuditAction.FAILED, step=effect.step, before=before,
                 after=audit_state(change.run, effect.step), data=effect.data(error=error))
    begin_compensation(change, plan, lease.steps,
                       reason=f"automatic, by policy: {effect.name}: {message}")
    advance_compensation(change, lease)


def halt(change: Change, lease: Lease, effect: Effect, before: dict, *, reason: str,
         message: str, data: dict, to: str = ATTENTION,
         action: str = AuditAction.ATTENTION) -> None:
    """Stop the lease holder's work and leave the run for a person, saying which effect
    and why."""
    effect.stopped(change, message)
    change.move(to, reason=reason, message=f"{effect.name}: {message}")
    change.audit(action, step=effect.step, before=before,
                 after=audit_state(change.run, effect.step), data=effect.data(**data))
    lease.finished, lease.work = True, None


def settle(change: Change, lease: Lease, effect: Effect, verdict, *, error: str = "") -> bool:
    """Settle an unknown effect with what the lookup by its key found. True when it
    succeeded (the caller goes on).

    Found: the effect happened (the key is the evidence, whatever the impact). LookupFailed:
    the lookup itself erred; it is a read, so it is asked again with backoff until the
    lookup budget is spent. NotFound, or no lookup but a receiver that honours keys: a
    low-impact effect is sent again with the same key through the one resend path, counted
    and backed off; a high-impact one waits for a person. Undetermined (or no way to ask):
    a person must settle it; LookupUnreadable (the lookup cannot open a sealed value it is
    asked with) too, and no lookup budget is spent: none can open it before the key is back.
    """
    row, spec, now = effect.row, effect.spec, change.now
    before = audit_state(change.run, effect.step)
    if isinstance(verdict, definition.Found):
        succeed(change, effect, verdict.result, verdict.ref, AuditAction.RECONCILED,
                verdict="found")
        return True
    if isinstance(verdict, definition.LookupFailed):
        row.lookup_failures += 1
        failures = row.lookup_failures
        data = {"verdict": "lookup failed", "error": verdict.reason,
                "lookup_failures": failures}
        if failures < spec.lookup_attempts:
            look_again(change, lease, effect, before,
                       at=now + timedelta(seconds=spec.retry.delay(failures)),
                       message=f"lookup by key failed ({failures} of "
                               f"{spec.lookup_attempts}); asking again",
                       data=data, action=AuditAction.LOOKUP_RETRY_SCHEDULED)
        else:
            halt(change, lease, effect, before, reason=AttentionReason.UNKNOWN_OUTCOME,
                 message=f"{failures} lookup{'s' if failures != 1 else ''} by key failed, "
                         f"the last with: {verdict.reason}; the outcome is still unknown",
                 data=data)
        return False
    low = spec.impact == definition.LOW
    if (low and isinstance(verdict, definition.NotFound)
            and (trusted_from := not_found_trusted_from(spec, row, now)) is not None):
        look_again(change, lease, effect, before, at=trusted_from,
                   message="not found yet; looking again before sending again",
                   data={"verdict": "not found yet"})
        return False
    if low and (isinstance(verdict, definition.NotFound) or (verdict is None and spec.honours_key)):
        row.lookup_failures = 0
        resend_or_stop(change, lease, effect, before=before,
                       why=("lookup by key found nothing" if verdict is not None else
                            "no lookup; the receiver deduplicates on the key"),
                       error=row.error_message or error, action=AuditAction.RECONCILED,
                       data={"verdict": "not found" if verdict is not None else "cannot ask",
                             "then": "send again with the same key"})
        return False
    noun = "call" if isinstance(effect, CallEffect) else "step"
    if isinstance(verdict, definition.NotFound):
        why, label = (f"reconciliation found no effect, but a high-impact {noun} is sent "
                      "again only after a person confirms"), "not found"
    elif verdict is None:
        why = (f"no reconcile function, and a high-impact {noun} is not resent without a "
               "person" if spec.honours_key else
               "no reconcile function and the receiver does not honour keys")
        label = "cannot ask"
    elif isinstance(verdict, definition.LookupUnreadable):
        why, label = (f"its lookup by key cannot open what it is asked with: {verdict.reason}; "
                      "the outcome is still unknown: look it up once the key is back"), \
            "sealed value unreadable"
        row.error_message = why[:2000]
    else:
        why, label = f"reconciliation could not tell: {verdict.reason or error}", \
            "undetermined"
        if error:  # the lookup's own error (lookups.unusable_answer): the row names it too
            row.error_message = why[:2000]
    halt(change, lease, effect, before, reason=still_unknown_reason(verdict), message=why,
         data={"verdict": label, "error": error})
    return False


def look_again(change: Change, lease: Lease, effect: Effect, before: dict, *, at,
               message: str, data: dict,
               action: str = AuditAction.RECONCILE_SCHEDULED) -> None:
    """Release the run until the effect is looked up again at `at` (it stays unknown:
    nothing is sent before the lookup)."""
    effect.row.next_attempt_at = at
    release_until(change, lease, effect, at, message=f"{effect.name}: {message}")
    change.audit(action, step=effect.step, before=before,
                 after=audit_state(change.run, effect.step),
                 data=effect.data(**data, recheck_at=at.isoformat()))


def undo_outcome(change: Change, lease: Lease, step: Step, outcome: Outcome) -> None:
    """The outcome of a step's undo (an agent step's undoes its tool calls). A compensation
    carries its own key and must be idempotent, so an unknown outcome is settled by sending
    it again through the one resend path, within its step's retry budget."""
    run = change.run
    effect = StepEffect(lease, step, undo=True)
    before = audit_state(run, step)
    effect.release()
    if outcome.succeeded:
        effect.undone(change, outcome.remote_ref, AuditAction.COMPENSATION_SUCCEEDED)
        advance_compensation(change, lease)
        return
    error = outcome.error
    step.error_class, step.error_message = error.error_class, error.message
    error_message = error.message
    if error.error_class in (ErrorClass.TRANSIENT, ErrorClass.UNKNOWN):
        spent = schedule_resend(change, lease, effect, before=before,
                                why=f"{error.error_class} error", error=error.message,
                                retry_after=error.retry_after)
        if spent is None:
            calls_due_again(change, step)
            return
        error_message = f"{error.message} ({spent})"
    # The row is written as a person's failed undo of one tool call writes it; the record is
    # the halt's, with the run's state before and after: a step's undo failing stops the
    # run's whole compensation, where a person's undo of one call moves no run state.
    effect.undo_failed(change, error.message, error.error_class)
    # An agent step's calls fail with it: the one left compensating, to be sent again with
    # its key, is sent by nothing now.
    calls = {call.ref: call.status for call in calls_not_undone(change, step)}
    # An undo that could not open a sealed value: its reason says what to mend (the key
    # ring). Where its own code opened the value (an earlier result it reads), it may have
    # sent before it read, as a write's may (fail): held as any failed undo, to be sent again
    # with its own key, never as an undo that sent nothing.
    reason = AttentionReason.SEALED_VALUE_UNREADABLE \
        if error.error_class == ErrorClass.UNREADABLE else AttentionReason.COMPENSATION_FAILED
    halt(change, lease, effect, before, to=CFAIL, reason=reason,
         message=f"compensation failed: {error_message}",
         data={"error": error.message, **({"tool_calls": calls} if calls else {})},
         action=AuditAction.COMPENSATION_FAILED)


# How a row settled as not done by a person (or a lookup they ran) says so.
SETTLED_NOT_DONE = "settled as not done: "


def settled_not_done(row) -> bool:
    """Whether `row` was settled as not done by a person (settled_by_person): a second such
    settlement (the same request sent twice at once) records nothing new."""
    return row.status == FAILED and row.error_message.startswith(SETTLED_NOT_DONE)


def settled_by_person(change: Change, effect: Effect, verdict, *, evidence: str,
                      reason: str) -> dict:
    """An unknown effect settled with what a person (or a lookup they ran) established,
    their evidence in the caller's audit record: Found, it happened (its result kept when
    the verdict brings none); NotFound, it did not; anything else, it stays unknown. Returns
    what the caller's record says of it: the verdict in words and, found, the remote
    reference as given (the row keeps what its column holds). What the run does next is the
    caller's: a step waits for an explicit retry, an agent is told and goes on."""
    row = effect.row
    row.lookup_failures = 0
    if isinstance(verdict, definition.Found):
        before = row.status
        stands(change, effect, verdict.result, verdict.ref, keep_result=True)
        effect.succeeded(change, before)
        said = {"verdict": "found", "remote_ref": str(verdict.ref or "")}
    elif isinstance(verdict, definition.NotFound):
        row.status = FAILED
        # Shown on the row (run page, show_run): masked as the audit record masks them.
        row.error_message = redact_text(f"{SETTLED_NOT_DONE}{evidence or reason}")
        said = {"verdict": "not found"}
    else:
        said = {"verdict": "undetermined"}
    effect.save(change)
    return said


def sent_again_by_person(change: Change, effect: Effect, *, reason: str, before: dict,
                         **data) -> None:
    """A person sends a stopped effect again with the same key: a fresh budget (a tool
    call's attempts go on counting), the run queued for it."""
    effect.row.status = PENDING
    effect.restart_budget()
    effect.save(change)
    change.run.next_wake_at = None
    change.move(QUEUED)
    change.audit(AuditAction.STEP_RETRIED, step=effect.step, reason=reason, before=before,
                 after=audit_state(change.run, effect.step),
                 data=effect.data(key=effect.row.idempotency_key, **data))


def held_for_approval(change: Change, lease: Lease, effect: Effect) -> bool:
    """Within the transition that would record the effect's intent: an effect that needs a
    person's approval before this attempt (the stop verdict, or a tool asking for these
    arguments) and has none waits for one instead, and nothing is sent. True when it waits.

    An approval that allows one attempt is spent by it (effect.spend_approval). While it
    waits no worker is held and the run has no wake time: a person's decision moves it on
    (decided_by_person), on the request the approvals app opens from the wait row saved
    with this change."""
    if not effect.needs_person():
        return False
    if effect.approved():
        effect.spend_approval()
        return False
    run = change.run
    before = audit_state(run, effect.step)
    effect.hold_for_person(change)
    change.move(WAITING, message=effect.wait_message)
    change.wait_for_person(*effect.waited_on)
    run.next_wake_at = None
    change.audit(effect.approval_action, step=effect.step, before=before,
                 after=audit_state(run, effect.step), data=effect.approval_data())
    lease.finished, lease.work = True, None
    return True


def decided_by_person(change: Change, effect: Effect, *, approved: bool, by: str,
                      comment: str, **data) -> None:
    """A person's decision on the attempt an effect waits for (held_for_approval), once the
    caller checked that it is theirs to make and still stands. Approved: that attempt may run
    (effect.grant records the approval) and the run is queued for it. Declined: it is never
    sent; a step fails for good and the run waits for a person, a tool call is declined and
    its agent goes on (effect.declined_stops_run). `data` joins the audit record."""
    run = change.run
    before = audit_state(run, effect.step)
    if approved:
        effect.grant(change, by)
        change.move(QUEUED)
    else:
        effect.decline(change, by, comment)
        if effect.declined_stops_run:
            change.move(ATTENTION, reason=AttentionReason.APPROVAL_REJECTED,
                        message=f"{effect.name}: {effect.row.error_message}")
        else:
            change.move(QUEUED)
    change.audit(effect.decision_action, step=effect.step, reason=comment, before=before,
                 after=audit_state(run, effect.step),
                 data=effect.decision_data(**data, approved=approved))
