"""The lease holder's transitions: claim a run, record each step's outcome together with the
next intent, settle unknown outcomes with what a lookup found, heartbeats, and the sweeper
taking back runs whose lease ran out. The executor calls these."""

import copy
from collections.abc import Callable
from contextlib import contextmanager
from datetime import datetime

from audit.actions import AuditAction
from audit.chain import Actor

from ... import store
from ...definitions import definition
from ...definitions.input_errors import input_errors_text
from ...models import (
    AttentionReason,
    Run,
    Step,
    StepStatus,
)
from .. import dispatch, limits
from ..code_fit import code_problem
from ..intentions import intended_action
from ..step_rows import index_of
from ..wakeup import send_wakeup
from . import effects, late_outcomes
from .approval_rules import approved_by_rule
from .clashes import written_again_on_clash
from .compensation import advance_compensation
from .events import awaits
from .kernel import (
    COMP,
    DONE,
    QUEUED,
    RUN_FIELDS,
    RUNNING,
    STEP_FIELDS,
    WAITING,
    Change,
    Lease,
    Outcome,
    audit_state,
    extend_lease,
    fenced,
    held_status,  # the package's shared vocabulary
    lease_until,
    lock_run,
    save_waits,
    terminate_in,
    transition_time,
    wait_began,
)
from .resends import due_at_once
from .timers import sleeps


def claim_run(run_id: int, *, worker: str, now: datetime | None = None,
              drill: bool = False) -> Lease | None:
    """Take a queued run, or a waiting run that is due, for `worker`.

    Returns None when the run is not claimable (another worker has it, it is not due, it is
    final, or it is a drill run and this is not the drill, or the other way round): the
    caller backs off. The claim is a conditional update on the expected status
    and fencing token, so two workers racing for one run get one claim; the first step's
    intent is recorded in the same commit.
    """
    return _claim_in_one_statement(run_id, worker, transition_time(now), given=now,
                                   drill=drill)

def _claim_in_one_statement(run_id: int, worker: str, now: datetime,
                            given: datetime | None, drill: bool) -> Lease | None:
    # Read without a lock, decide, then write claim and first intent in one statement that
    # matches only if the run is still as read: of two racing workers, one matches.
    # One read for the run and its steps, in the transaction of the write: one commit per
    # claim, not one for the read and one for the write.
    db = store.current()
    with db.transaction():
        run, steps = db.read_run_and_steps(run_id)
        if run is None:
            run = Run.objects.filter(pk=run_id).first()
        # A drill run is advanced by the drill alone: one that breaks it on purpose in its own
        # process (an injected failure) would not break it in a fleet worker woken by a
        # decision, which would do the real thing. Nor does the drill advance real work.
        if run is None or run.drill != drill or not _due(run, now):
            return None
        expect_status, expect_token, expect_seq = run.status, run.fencing_token, run.audit_seq
        lease, change = _apply_claim(run, steps, worker, now, given)
        # Whether the run is due and until when the lease runs are settled by the write
        # statement on the database's clock (`now` is this process's estimate of it).
        written = db.write_if_unchanged(
            run=run, steps=list(change.steps.values()), records=change.records,
            events=change.events,
            run_fields=RUN_FIELDS, step_fields=STEP_FIELDS, expect_token=expect_token,
            expect_status=expect_status, expect_seq=expect_seq,
            renew_lease=run.lease_expires_at is not None,
            wake_due=expect_status != QUEUED, clock=given,
        )
        if written:
            save_waits([change])
    if not written:
        return None
    if change.wake:
        send_wakeup(run.pk)
    return lease

def _due(run: Run, now: datetime) -> bool:
    due = run.status == QUEUED or (run.status in (WAITING, COMP) and run.next_wake_at is not None
                              and run.next_wake_at <= now)
    # Limits count held runs under a lock taken here, kept until the claim commits.
    return due and not _held(run) and limits.admits(run)

def _held(run: Run) -> bool:
    # A paused dispatch (runs.machine.dispatch) keeps the run where it is: queued stays queued.
    return dispatch.pause_holding(run) is not None

def _apply_claim(run: Run, steps: list[Step], worker: str, now: datetime,
                 given: datetime | None = None) -> tuple[Lease, "Change"]:
    """The claim itself, on rows read by the caller: new fencing token, lease, audit record,
    and the first piece of work (or attention when the definition is missing)."""
    before = audit_state(run)
    run.fencing_token += 1
    change = Change(run, "claim", Actor.system(worker), now)
    workflow_def = definition.registry.get(run.workflow_name, run.workflow_version)
    lease = Lease(run=run, steps=steps, token=run.fencing_token, worker=worker,
                  definition=workflow_def, clock=given)
    unworkable = _unworkable(run, steps, workflow_def, lease)
    if unworkable is not None:
        reason, action, message = unworkable
        change.move(held_status(run), reason=reason, message=message)
        change.audit(action, before=before, after=audit_state(run))
        lease.finished = True
        return lease, change
    change.move(COMP if run.status == COMP else RUNNING)
    run.lease_owner, run.lease_expires_at, run.heartbeat_at = worker, lease_until(now), now
    run.next_wake_at = None
    change.audit(AuditAction.CLAIMED, before=before, after=audit_state(run),
                 data={"worker": worker})
    _next(change, lease)
    return lease, change

def _unworkable(run: Run, steps: list[Step], workflow_def: definition.Workflow | None,
                lease: Lease) -> tuple[str, AuditAction, str] | None:
    """Why no worker can work the run as its code stands (attention reason, audit action,
    message), or None, with the parsed input kept on the lease for its steps. Such a run
    waits for a person (held_status)."""
    name = f"{run.workflow_name} v{run.workflow_version}"
    problem = code_problem(name, workflow_def, [s.name for s in steps],
                           undoing=run.status == COMP)
    if problem is not None:
        return (AttentionReason.DEFINITION_MISSING, AuditAction.DEFINITION_MISSING, problem)
    lease.validated_input, errors = workflow_def.parse_input(run.input)
    if errors:
        # Its version's schema changed under it: every step would fail the same way.
        return (AttentionReason.INPUT_REJECTED, AuditAction.INPUT_REJECTED,
                f"{name} no longer accepts this run's input: "
                f"{input_errors_text(errors)}")
    return None

def _next(change: Change, lease: Lease) -> None:
    if change.run.status == COMP:
        advance_compensation(change, lease)
    else:
        advance(change, lease)

def advance(change: Change, lease: Lease) -> None:
    """Move the run to its next piece of work, within the current transaction.

    Records the intent of the next runnable step, or leaves an unknown step for the executor
    to reconcile, or completes the run. A cancel request takes effect here: at a boundary.
    """
    run, now = change.run, change.now
    lease.work, lease.settle_first, lease.compensating = None, False, False
    if run.cancel_requested:
        # Recorded as the cancel it completes, as one taking effect inside an agent step is.
        terminate_in(change, lease.steps, reason="cancelled at a step boundary",
                     action=AuditAction.CANCELLED)
        lease.finished = True
        return
    step = index_of(lease, lease.steps).first_not_done()
    if step is None:
        before = audit_state(run)
        change.move(DONE)
        run.current_step = ""
        change.audit(AuditAction.COMPLETED, before=before, after=audit_state(run))
        lease.finished = True
        return
    run.current_step = step.name
    if step.status in (StepStatus.UNKNOWN, StepStatus.RUNNING):
        lease.work, lease.settle_first = step, True
        return
    if step.kind == definition.SLEEP:
        # A durable timer (runs.machine.transitions.timers): asleep until its time, or done now.
        if sleeps(change, lease, step):
            return
        effects.succeed(change, effects.StepEffect(lease, step), {"woke_at": now.isoformat()},
                        "", AuditAction.TIMER_FIRED)
        advance(change, lease)
        return
    if step.kind == definition.EVENT:
        # A wait for an external event (runs.machine.transitions.events); over by a timeout policy
        # that continues with a default.
        if awaits(change, lease, step):
            return
        advance(change, lease)
        return
    if step.kind == definition.APPROVAL:
        if approved_by_rule(change, lease, step):  # its approve_if needs no person
            advance(change, lease)
            return
        # A durable wait: no worker is held; decide_approval moves the run on.
        before = audit_state(run, step)
        wait_began(step, now)
        change.step_changed(step)
        change.move(WAITING, message=f"{step.name} waits for a person's approval")
        change.wait_for_person(step)
        run.next_wake_at = None
        change.audit(AuditAction.APPROVAL_REQUESTED, step=step,
                     before=before, after=audit_state(run, step))
        lease.finished = True
        return
    # The claim made sure that the workflow has a step for each of the run's rows.
    spec = lease.spec(step.name)
    pause = dispatch.holds(lease.definition.name, spec.system)
    if pause is not None:
        # The step before finished; this one does not start while the dispatch is paused.
        # Due at once, so the sweeper wakes it as soon as the pause is lifted.
        before = audit_state(run)
        change.move(WAITING, message=dispatch.pause_words(pause))
        run.next_wake_at = due_at_once(now)
        change.audit(AuditAction.DISPATCH_HELD, step=step, before=before,
                     after=audit_state(run), data={"system": pause.system})
        lease.finished = True
        return
    effect = effects.StepEffect(lease, step, spec=spec)
    if effects.held_for_approval(change, lease, effect):
        return
    step.intended_action = intended_action(lease.definition, effect.spec, run, lease.steps,
                                           step)
    step.budget_started_at = step.budget_started_at or now
    step.lease_owner, step.lease_expires_at = lease.worker, run.lease_expires_at
    effect.begun(change)
    lease.work = step


@contextmanager
def holding(lease: Lease, action: str, now: datetime | None = None, *,
             cancel_before: str = "", cancel_after: Callable[[], str] | None = None):
    """The skeleton of the lease holder's transitions (a step's outcome or its lookup, an
    agent's turns and tool calls): the run locked, still under the lease's token, the move
    checked; the body's changes saved together. Yields None, writing nothing, if the lease
    was taken over (the executor then stops).

    A cancel request is read here, under the run's lock: `cancel_before` names the work
    about to start (none starts: yields None), `cancel_after` gives in words the work just
    done, read once the body has recorded what it came to (the body's changes are kept,
    then the run stops)."""
    given, now = now, transition_time(now)
    with store.current().transaction():
        run = lock_run(lease.run.pk)
        if fenced(run, lease):
            lease.finished, lease.work = True, None
            yield None
            return
        change = Change(run, action, Actor.system(lease.worker), now)
        # Renewed by the database's clock, read in the statement that locked the run (a
        # row the caller locked itself carries none: this process's estimate of it).
        extend_lease(run, store.time_of_lock(run, given=given))
        lease.run = run
        if cancel_before and run.cancel_requested:
            _cancel_inside(change, lease, cancel_before)
            change.save()
            yield None
            return
        yield change
        if cancel_after and run.cancel_requested and not lease.finished:
            _cancel_inside(change, lease, cancel_after())
        change.save()


def _cancel_inside(change: Change, lease: Lease, where: str) -> None:
    """A cancel request takes effect inside the agent step: nothing new starts, the calls
    made so far and the conversation are kept, and the record says where it took effect."""
    step = lease.work
    if step is not None and step.status == StepStatus.RUNNING:
        step.status = StepStatus.FAILED
        step.error_class = ""
        step.error_message = f"cancelled by a person {where}"
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
    terminate_in(change, lease.steps, reason=f"cancel took effect {where}",
                  action=AuditAction.CANCELLED,
                  data={"step": step.name if step else "", "where": where})
    lease.finished, lease.work = True, None


def record_outcome(lease: Lease, step: Step, outcome: Outcome, *,
                   now: datetime | None = None) -> Lease:
    """Record a step's outcome under the lease it was called with, and the next intent.

    If the lease was taken over (the token moved on) the result changes no state: it is kept
    in the run's log as a late result, evidence for the operator. A run terminated while the
    step was in flight gets the result recorded on the step, since nobody else will.

    Rolled back by the database for a clash with another session, it is written again from
    the rows as the database holds them (clashes): the outcome is never dropped.
    """
    return written_again_on_clash(
        lease, step, f"the outcome of step {step.name}",
        lambda step: record_outcome_once(lease, step, outcome, now))

def record_outcome_once(lease: Lease, step: Step, outcome: Outcome,
                    now: datetime | None) -> Lease:
    given, now = now, transition_time(now)
    if outcome.succeeded and not lease.compensating:
        if _record_success_in_one_statement(lease, step, outcome, now, given):
            return lease
        step = lease.by_name(step.name)  # the row as read again after the miss
    with holding(lease, "record_outcome", given) as change:
        if change is None:
            late_outcomes.late_result(lock_run(lease.run.pk), lease,
                                      effects.StepEffect(lease, step), outcome, now)
            return lease
        effect = effects.StepEffect(lease, step)
        if lease.compensating:
            effects.undo_outcome(change, lease, step, outcome)
        elif outcome.succeeded:
            effects.succeed(change, effect, outcome.value, outcome.remote_ref,
                            AuditAction.SUCCEEDED)
            advance(change, lease)
        elif effects.fail(change, lease, effect, outcome):
            advance(change, lease)
    return lease

def _record_success_in_one_statement(lease: Lease, step: Step, outcome: Outcome,
                                     now: datetime, given: datetime | None) -> bool:
    """The hot path: the same transition as the locking path, applied to a copy of the
    lease holder's run row and to its step rows, and written by one conditional statement
    (see runs.store). False, with nothing written, if the run moved on meanwhile: the
    lease's step rows are then read again as the database holds them, for the locking path.

    The step rows are not copied: copying every row of the run at every step made each
    checkpoint's cost grow with the run's length (a run of thousands of steps spent most of
    its time copying the rows of the steps done before), and the transition may change any
    unfinished row (a cancel taking effect at the boundary skips them all). A miss is rare
    (an operator moved the run, once per approval wait): reading the rows again then costs
    what one claim costs."""
    # Shallow: its rule_answers are the lease's, so that an approval step's rule asked here
    # is not asked again by the locking path this trial may leave the change to.
    trial = copy.copy(lease)
    trial.run = _shallow_copy(lease.run)
    expect_status, expect_seq = trial.run.status, trial.run.audit_seq
    change = Change(trial.run, "record_outcome", Actor.system(lease.worker), now)
    renewed = extend_lease(trial.run, now)
    effects.succeed(change, effects.StepEffect(trial, trial.by_name(step.name)),
                    outcome.value, outcome.remote_ref, AuditAction.SUCCEEDED)
    advance(change, trial)
    if change.waits_changed:
        # The run stops at an approval: its wait row must commit with it, which the one
        # statement does not write. The locking path does (rare: once per approval).
        _read_steps_again(lease)
        return False
    written = store.current().write_if_unchanged(
        run=trial.run, steps=list(change.steps.values()), records=change.records,
        events=change.events,
        run_fields=RUN_FIELDS, step_fields=STEP_FIELDS, expect_token=lease.token,
        expect_status=expect_status, expect_seq=expect_seq,
        renew_lease=renewed and trial.run.lease_expires_at is not None, clock=given,
    )
    if not written:
        _read_steps_again(lease)
        return False
    lease.run, lease.work = trial.run, trial.work
    lease.finished, lease.settle_first = trial.finished, trial.settle_first
    if change.wake:  # the statement has committed: the hint can go now
        send_wakeup(trial.run.pk)
    return True

def _read_steps_again(lease: Lease) -> None:
    # The trial changed the lease's step rows in memory and nothing was written.
    _, lease.steps = store.current().read_run_and_steps(lease.run.pk)


def _shallow_copy(instance):
    # copy.copy of a model instance goes through __reduce__ and costs ten times more.
    clone = instance.__class__.__new__(instance.__class__)
    clone.__dict__ = instance.__dict__.copy()
    return clone
