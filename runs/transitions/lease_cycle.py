"""The lease holder's transitions: claim a run, record each step's outcome together with the
next intent, settle unknown outcomes with what a lookup found, heartbeats, and the sweeper
taking back runs whose lease ran out. The executor calls these."""

import copy
from datetime import datetime

from django.db import transaction

from audit.actions import AuditAction
from audit.chain import Actor

from .. import checkpoint_sql, dispatch, limits
from .. import definition as d
from ..intentions import intended_action
from ..models import (
    AttentionReason,
    ErrorClass,
    Run,
    Step,
    StepStatus,
)
from ..redaction import redact
from ..wakeup import send_wakeup
from . import stop_gate
from .compensation import (
    _advance_compensation,
    _begin_compensation,
    _compensation_outcome,
    compensation_plan,
)
from .events import awaits
from .kernel import (  # the package's shared vocabulary
    _RUN_FIELDS,
    _STEP_FIELDS,
    COMP,
    DONE,
    DONE_STEP_STATUSES,
    TERM,
    A,
    Lease,
    Outcome,
    Q,
    R,
    W,
    _Change,
    _definition_step,
    _extend_lease,
    _fenced,
    _halt,
    _lease_until,
    _lock,
    _now,
    _snapshot,
    _steps,
    _terminate_in,
    save_waits,
)
from .resends import schedule_resend
from .timers import sleeps


def claim_run(run_id: int, *, worker: str, now: datetime | None = None) -> Lease | None:
    """Take a queued run, or a waiting run that is due, for `worker`.

    Returns None when the run is not claimable (another worker has it, it is not due, it is
    final): the caller backs off. The claim is a conditional update on the expected status
    and fencing token, so two workers racing for one run get one claim; the first step's
    intent is recorded in the same commit.
    """
    now = _now(now)
    if checkpoint_sql.supported():
        return _claim_in_one_statement(run_id, worker, now)
    with transaction.atomic(durable=True):
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None or not _due(run, now):
            return None
        claimed = Run.objects.filter(
            pk=run.pk, status=run.status, fencing_token=run.fencing_token
        ).update(fencing_token=run.fencing_token + 1)
        if claimed != 1:
            return None
        lease, change = _apply_claim(run, _steps(run), worker, now)
        change.save()
    return lease

def _claim_in_one_statement(run_id: int, worker: str, now: datetime) -> Lease | None:
    # Read without a lock, decide, then write claim and first intent in one statement that
    # matches only if the run is still as read: of two racing workers, one matches.
    # One read for the run and its steps, in the transaction of the write: one commit per
    # claim, not one for the read and one for the write.
    with transaction.atomic(durable=True):
        run, steps = checkpoint_sql.read_run_and_steps(run_id)
        if run is None:
            run = Run.objects.filter(pk=run_id).first()
        if run is None or not _due(run, now):
            return None
        expect_status, expect_token, expect_seq = run.status, run.fencing_token, run.audit_seq
        lease, change = _apply_claim(run, steps, worker, now)
        written = checkpoint_sql.write_if_unchanged(
            run=run, steps=list(change.steps.values()), records=change.records,
            events=change.events,
            run_fields=_RUN_FIELDS, step_fields=_STEP_FIELDS, expect_token=expect_token,
            expect_status=expect_status, expect_seq=expect_seq,
        )
        if written:
            save_waits([change])
    if not written:
        return None
    if change.wake:
        send_wakeup(run.pk)
    return lease

def _due(run: Run, now: datetime) -> bool:
    due = run.status == Q or (run.status in (W, COMP) and run.next_wake_at is not None
                              and run.next_wake_at <= now)
    # Limits count held runs under a lock taken here, kept until the claim commits.
    return due and not _held(run) and limits.admits(run)

def _held(run: Run) -> bool:
    # A paused dispatch (runs.dispatch) keeps the run where it is: queued stays queued.
    definition = d.registry.get(run.workflow_name, run.workflow_version)
    if definition is None:
        return dispatch.holds(run.workflow_name) is not None
    return dispatch.holds_step(definition, run.current_step) is not None

def _apply_claim(run: Run, steps: list[Step], worker: str,
                 now: datetime) -> tuple[Lease, "_Change"]:
    """The claim itself, on rows read by the caller: new fencing token, lease, audit record,
    and the first piece of work (or attention when the definition is missing)."""
    before = _snapshot(run)
    run.fencing_token += 1
    change = _Change(run, "claim", Actor.system(worker), now)
    definition = d.registry.get(run.workflow_name, run.workflow_version)
    lease = Lease(run=run, steps=steps, token=run.fencing_token, worker=worker,
                  definition=definition)
    if definition is None:
        change.move(A, reason=AttentionReason.DEFINITION_MISSING,
                    message=f"{run.workflow_name} v{run.workflow_version} is not registered "
                            "in this worker")
        change.audit(AuditAction.DEFINITION_MISSING, before=before, after=_snapshot(run))
        lease.finished = True
        return lease, change
    change.move(COMP if run.status == COMP else R)
    run.lease_owner, run.lease_expires_at, run.heartbeat_at = worker, _lease_until(now), now
    run.next_wake_at = None
    change.audit(AuditAction.CLAIMED, before=before, after=_snapshot(run), data={"worker": worker})
    _next(change, lease)
    return lease, change

def _next(change: _Change, lease: Lease) -> None:
    if change.run.status == COMP:
        _advance_compensation(change, lease)
    else:
        _advance(change, lease)

def _advance(change: _Change, lease: Lease) -> None:
    """Move the run to its next piece of work, within the current transaction.

    Records the intent of the next runnable step, or leaves an unknown step for the executor
    to reconcile, or completes the run. A cancel request takes effect here: at a boundary.
    """
    run, now = change.run, change.now
    lease.work, lease.settle_first, lease.compensating = None, False, False
    if run.cancel_requested:
        _terminate_in(change, lease.steps, reason="cancelled at a step boundary")
        lease.finished = True
        return
    step = next((s for s in lease.steps if s.status not in DONE_STEP_STATUSES), None)
    if step is None:
        before = _snapshot(run)
        change.move(DONE)
        run.current_step = ""
        change.audit(AuditAction.COMPLETED, before=before, after=_snapshot(run))
        lease.finished = True
        return
    run.current_step = step.name
    if step.status in (StepStatus.UNKNOWN, StepStatus.RUNNING):
        lease.work, lease.settle_first = step, True
        return
    if step.kind == d.SLEEP:
        # A durable timer (runs.transitions.timers): asleep until its time, or done now.
        if sleeps(change, lease, step):
            return
        _succeed(change, lease, step, {"woke_at": now.isoformat()}, "", AuditAction.TIMER_FIRED)
        _advance(change, lease)
        return
    if step.kind == d.EVENT:
        # A wait for an external event (runs.transitions.events); over by a timeout policy
        # that continues with a default.
        if awaits(change, lease, step):
            return
        _advance(change, lease)
        return
    if step.kind == d.APPROVAL:
        # A durable wait: no worker is held; decide_approval moves the run on.
        before = _snapshot(run, step)
        step.status = StepStatus.WAITING
        step.started_at = step.started_at or now
        change.step_changed(step)
        change.move(W, message=f"{step.name} waits for a person's approval")
        change.wait_for_person(step)
        run.next_wake_at = None
        change.audit(AuditAction.APPROVAL_REQUESTED, step=step,
                     before=before, after=_snapshot(run, step))
        lease.finished = True
        return
    pause = dispatch.holds_step(lease.definition, step.name)
    if pause is not None:
        # The step before finished; this one does not start while the dispatch is paused.
        # Due at once, so the sweeper wakes it as soon as the pause is lifted.
        before = _snapshot(run)
        change.move(W, message=f"dispatch paused by {pause.paused_by}: {pause.reason}")
        run.next_wake_at = now
        change.audit(AuditAction.DISPATCH_HELD, step=step, before=before,
                     after=_snapshot(run), data={"system": pause.system})
        lease.finished = True
        return
    if stop_gate.waits_before_attempt(change, lease, step, _definition_step(lease, step)):
        return
    # The intent checkpoint is the row itself; the attempt's outcome record carries it.
    step.status = StepStatus.RUNNING
    step.intended_action = intended_action(lease.definition, _definition_step(lease, step),
                                           run, lease.steps, step)
    step.attempt += 1
    step.budget_started_at = step.budget_started_at or now
    step.started_at = step.started_at or now
    step.attempt_started_at = now
    step.next_attempt_at = None
    step.lease_owner, step.lease_expires_at = lease.worker, run.lease_expires_at
    change.step_changed(step)
    lease.work = step

def record_outcome(lease: Lease, step: Step, outcome: Outcome, *,
                   now: datetime | None = None) -> Lease:
    """Record a step's outcome under the lease it was called with, and the next intent.

    If the lease was taken over (the token moved on) the result changes no state: it is kept
    in the run's log as a late result, evidence for the operator. A run terminated while the
    step was in flight gets the result recorded on the step, since nobody else will.
    """
    now = _now(now)
    if outcome.succeeded and not lease.compensating and checkpoint_sql.supported():
        if _record_success_in_one_statement(lease, step, outcome, now):
            return lease
    with transaction.atomic(durable=True):
        run = _lock(lease.run.pk)
        if _fenced(run, lease):
            _record_late_result(run, step, outcome, lease, now)
            lease.finished, lease.work = True, None
            return lease
        change = _Change(run, "record_outcome", Actor.system(lease.worker), now)
        _extend_lease(run, now)
        lease.run = run
        if lease.compensating:
            _compensation_outcome(change, lease, step, outcome)
        elif outcome.succeeded:
            _succeed(change, lease, step, outcome.value, outcome.remote_ref,
                     AuditAction.SUCCEEDED)
            _advance(change, lease)
        else:
            _fail(change, lease, step, outcome)
        change.save()
    return lease

def _record_success_in_one_statement(lease: Lease, step: Step, outcome: Outcome,
                                     now: datetime) -> bool:
    """The hot path: the same transition as the locking path, applied to copies of the
    lease holder's rows and written by one conditional statement (see checkpoint_sql).
    False, with nothing written and the lease untouched, if the run moved on meanwhile."""
    trial = copy.copy(lease)
    trial.run = _shallow_copy(lease.run)
    trial.steps = [_shallow_copy(s) for s in lease.steps]
    expect_status, expect_seq = trial.run.status, trial.run.audit_seq
    change = _Change(trial.run, "record_outcome", Actor.system(lease.worker), now)
    _extend_lease(trial.run, now)
    _succeed(change, trial, trial.by_name(step.name), outcome.value, outcome.remote_ref,
             AuditAction.SUCCEEDED)
    _advance(change, trial)
    if change.waits_changed:
        # The run stops at an approval: its wait row must commit with it, which the one
        # statement does not write. The locking path does (rare: once per approval).
        return False
    written = checkpoint_sql.write_if_unchanged(
        run=trial.run, steps=list(change.steps.values()), records=change.records,
        events=change.events,
        run_fields=_RUN_FIELDS, step_fields=_STEP_FIELDS, expect_token=lease.token,
        expect_status=expect_status, expect_seq=expect_seq,
    )
    if not written:
        return False
    lease.run, lease.steps, lease.work = trial.run, trial.steps, trial.work
    lease.finished, lease.settle_first = trial.finished, trial.settle_first
    if change.wake:  # the statement has committed: the hint can go now
        send_wakeup(trial.run.pk)
    return True

def _shallow_copy(instance):
    # copy.copy of a model instance goes through __reduce__ and costs ten times more.
    clone = instance.__class__.__new__(instance.__class__)
    clone.__dict__ = instance.__dict__.copy()
    return clone

def _succeed(change: _Change, lease: Lease, step: Step, value, remote_ref: str,
             action: str, data: dict | None = None) -> None:
    before = step.status
    step.status = StepStatus.SUCCEEDED
    step.result = redact(value)
    step.remote_ref = remote_ref or ""
    step.error_class, step.error_message = "", ""
    step.finished_at = change.now
    step.lease_owner, step.lease_expires_at = "", None
    change.step_changed(step)
    change.run.steps_done = sum(1 for s in lease.steps if s.status in DONE_STEP_STATUSES)
    change.audit(action, step=step, before={"step_status": before},
                 after={"step_status": step.status, "remote_ref": step.remote_ref},
                 data=data)

def _fail(change: _Change, lease: Lease, step: Step, outcome: Outcome) -> None:
    """Apply a classified error to the step and decide what the run does next."""
    error, run = outcome.error, change.run
    spec = _definition_step(lease, step)
    before = _snapshot(run, step)
    step.error_class, step.error_message = error.error_class, error.message
    step.lease_owner, step.lease_expires_at = "", None
    cls = error.error_class
    if cls == ErrorClass.UNKNOWN and not spec.has_side_effect:
        cls = ErrorClass.TRANSIENT  # nothing to duplicate: a read is simply tried again

    if cls == ErrorClass.MODEL_FORMAT:
        step.format_failures += 1
        step.result = {"invalid_output": redact(outcome.invalid_output)}
        if step.format_failures <= spec.format_failure_budget:
            step.status = StepStatus.PENDING
            change.step_changed(step)
            change.audit(AuditAction.MODEL_OUTPUT_REJECTED, step=step, before=before,
                         after=_snapshot(run, step), data={"error": error.message,
                         "failures": step.format_failures})
            _advance(change, lease)
            return
        step.status = StepStatus.FAILED
        change.step_changed(step)
        _halt(change, lease, step, before, A, AttentionReason.MODEL_OUTPUT_PAUSED,
              f"{step.name}: model output failed its schema {step.format_failures} times",
              error.message)
        return

    if cls == ErrorClass.TRANSIENT:
        _resend_or_stop(change, lease, step, before=before, why="transient error",
                        error=error.message, retry_after=error.retry_after)
        return

    if cls == ErrorClass.PERMANENT:
        step.status = StepStatus.FAILED
        change.step_changed(step)
        _stop(change, lease, step, before, AttentionReason.PERMANENT_ERROR,
              f"{step.name}: {error.message}", error.message)
        return

    if cls == ErrorClass.UNKNOWN:
        # It may have happened. Never relabel it failed: the executor reconciles by key
        # before anything else is written.
        step.status = StepStatus.UNKNOWN
        change.step_changed(step)
        change.audit(AuditAction.OUTCOME_UNKNOWN, step=step,
                     before=before, after=_snapshot(run, step),
                     data={"error": error.message})
        lease.work, lease.settle_first = step, True
        return

    # Unclassified: for a side-effecting step we cannot know whether it acted.
    step.status = StepStatus.UNKNOWN if spec.has_side_effect else StepStatus.FAILED
    step.error_class = ErrorClass.UNCLASSIFIED
    change.step_changed(step)
    _halt(change, lease, step, before, A, AttentionReason.UNCLASSIFIED_ERROR,
          f"{step.name}: {error.message}", error.message)

def _resend_or_stop(change: _Change, lease: Lease, step: Step, *, before: dict, **resend
                    ) -> None:
    """Send the step again if its budget allows (see resends), else fail it as exhausted
    (each attempt had evidence that nothing changed) and stop."""
    spent = schedule_resend(change, lease, step, before=before, **resend)
    if spent is None:
        return
    step.status = StepStatus.FAILED
    step.error_class = ErrorClass.EXHAUSTED
    change.step_changed(step)
    _stop(change, lease, step, before, AttentionReason.BUDGET_EXHAUSTED,
          f"{step.name}: {spent}", resend["error"])


def _stop(change: _Change, lease: Lease, step: Step, before: dict, reason: str,
          message: str, error: str) -> None:
    """A step failed with evidence that nothing changed: undo the completed steps where the
    workflow's policy allows it, otherwise stop for a person. An automatic compensation
    undoes only low-impact steps by itself: it pauses for a person at any high-impact undo
    (see _advance_compensation)."""
    plan = compensation_plan(lease.steps, lease.definition)
    automatic = (lease.definition.auto_compensate and plan
                 and not any(s.status == StepStatus.UNKNOWN for s in lease.steps))
    if automatic:
        change.audit(AuditAction.FAILED, step=step,
                     before=before, after=_snapshot(change.run, step),
                     data={"error": error})
        _begin_compensation(change, plan, reason=f"automatic, by policy: {message}")
        _advance_compensation(change, lease)
        return
    _halt(change, lease, step, before, A, reason, message, error)

def _record_late_result(run: Run, step: Step, outcome: Outcome, lease: Lease,
                        now: datetime) -> None:
    change = _Change(run, None, Actor.system(lease.worker), now)
    data = {
        # "claim", not "token": the redaction filter rightly masks anything named token.
        "worker": lease.worker, "claim": lease.token, "current_claim": run.fencing_token,
        "succeeded": outcome.succeeded, "remote_ref": outcome.remote_ref,
        "value": outcome.value,
        "error": outcome.error.message if outcome.error else "",
    }
    current = Step.objects.get(pk=step.pk)
    if run.status == TERM and current.status == StepStatus.UNKNOWN and outcome.succeeded:
        before = current.status
        current.status = StepStatus.SUCCEEDED
        current.result = redact(outcome.value)
        current.remote_ref = outcome.remote_ref or ""
        current.finished_at = now
        change.step_changed(current)
        change.audit(AuditAction.LATE_RESULT_RECORDED, step=current, before={"step_status": before},
                     after={"step_status": current.status, "remote_ref": current.remote_ref},
                     data=data)
    else:
        change.audit(AuditAction.LATE_RESULT, step=step, data=data)
    change.save()
