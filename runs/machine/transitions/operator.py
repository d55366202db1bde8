"""The operator actions (also available to automation): resume, reconcile, retry a step, ask
the model again, compensate, confirm an undo, cancel, terminate, reopen, and the skeleton
every operator transition is written in (operator_transition). Each needs a reason and is
refused, with nothing written, where operator_rules.refusal says it cannot succeed or a
second person must agree; runs.operator.actions is the table callers read."""

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime

from audit.actions import AuditAction
from audit.chain import Actor
from audit.quoting import quoted

from ...definitions import definition
from ...models import (
    AttentionReason,
    Run,
    Step,
    StepStatus,
)
from ..errors import SecondPersonRequired, TransitionNotAllowed
from . import effects
from .compensation import begin_compensation, compensation_plan
from .kernel import (  # the package's shared vocabulary
    ATTENTION,
    COMP,
    DONE_STEP_STATUSES,
    HELD,
    QUEUED,
    RUNNING,
    Change,
    audit_state,
    end_or_hold,
    require_evidence,
    reset_budget,
    terminate_in,
    transition_on,
    unsettled_effects,
)
from .lookup_verdicts import looked_up_verdict, still_unknown_reason
from .operator_rules import (
    checked,
    first_refusal,
    high_impact_effects,
    needs_second_person,
    paused_undo,
    require_action_reason,
)
from .operator_words import LABELS
from .rerun_rules import rerun_range
from .resends import due_at_once


def _same_person(a: Actor, b: Actor) -> bool:
    if a.user_id is not None or b.user_id is not None:
        return a.user_id == b.user_id
    return a.label == b.label


@dataclass
class Operation:
    """What an operator transition works on, locked and checked."""

    change: Change
    run: Run
    steps: list[Step]
    step: Step | None
    definition: definition.Workflow | None


@contextmanager
def operator_transition(run_id: int, action: str, *, actor: Actor, reason: str,
                        now: datetime | None, step_name: str | None = None,
                        call_ref: str = "", approved_by: Actor | None = None):
    """The skeleton of every operator transition: a reason, the run locked, the tool call
    `call_ref` it is aimed at (if any) found, the move checked against the table, the action
    checked against refusal() and the four-eyes rule; then the body's changes saved
    together, or (if the body raises) nothing at all."""
    require_action_reason(action, reason)
    # A run whose state refuses the action is told so in a person's words, the action named
    # as the console labels it, where the table's own check would name the transition; a
    # call named that the run does not have is told first (first_refusal).
    with transition_on(run_id, action, actor=actor, now=now,
                       refused=lambda run: first_refusal(action, run, step_name,
                                                         call_ref)) as change:
        found = checked(action, change.run, step_name)
        run, steps, step, workflow_def = found.run, found.steps, found.step, found.definition
        if needs_second_person(action, steps, step):
            counted = rerun_range(steps, step) if action == "rerun_from_step" else steps
            names = "; ".join(str(e) for e in high_impact_effects(counted))
            if approved_by is None:
                raise SecondPersonRequired(
                    f"{LABELS[action]} of run {run_id} needs a second person's approval: "
                    f"high-impact effects stand or may stand ({names})")
            if _same_person(actor, approved_by):
                raise SecondPersonRequired(
                    f"{LABELS[action]} of run {run_id} must be approved by someone other than "
                    f"{actor.label}")
        held = run.status in HELD
        yield Operation(change, run, steps, step, workflow_def)
        if held and change.run.status not in HELD:
            # A person let go of a run a worker held (terminated, compensation stopped):
            # its slot under the workflow's limits is free. A worker's release wakes the
            # runs it held back (runs.tasks.advance_run); the hint for this run brings one
            # that releases it, where the sweeper's late pass would come seconds later.
            change.wake = True


# The id of the second person's decision being applied (approvals.decisions, applying a
# four-eyes request): recorded beside `approved_by`, so that the run's record of the action
# names the decision it came from and a decision applied once is recognised by its id.
_applied_decision: ContextVar[str] = ContextVar("applied_decision", default="")


@contextmanager
def applying_decision(decision_id: str):
    """The operator transitions within write `decision_id` into their four-eyes data."""
    token = _applied_decision.set(decision_id)
    try:
        yield
    finally:
        _applied_decision.reset(token)


def four_eyes_data(data: dict | None, approved_by: Actor | None) -> dict | None:
    if approved_by is None:
        return data
    decision = {"decision_id": _applied_decision.get()} if _applied_decision.get() else {}
    return {**(data or {}), "approved_by": approved_by.label, **decision}


def resume(run_id: int, *, actor: Actor, reason: str, now: datetime | None = None) -> Run:
    """Continue a run from its last checkpoint.

    The current step is tried again with its budget renewed; an unknown step is reconciled
    first, never blindly resent.
    """
    with operator_transition(run_id, "resume", actor=actor, reason=reason, now=now) as op:
        run, change = op.run, op.change
        before = audit_state(run)
        for step in op.steps:
            if step.status in (StepStatus.FAILED, StepStatus.SCHEDULED):
                step.status = StepStatus.PENDING
                reset_budget(step)
                change.step_changed(step)
            elif step.status == StepStatus.UNKNOWN and step.lookup_failures:
                step.lookup_failures = 0  # the person asks for the lookups to be tried again
                change.step_changed(step)
        run.next_wake_at = None
        change.move(QUEUED)
        change.audit(AuditAction.RESUMED, reason=reason, before=before, after=audit_state(run))
    return run

def reconcile(run_id: int, *, step_name: str, verdict, actor: Actor, reason: str,
              evidence: str = "", looked_up: bool = False, now: datetime | None = None) -> Run:
    """Settle a step whose outcome a person or a lookup has established.

    `verdict` is Found(ref) (the effect happened: the step succeeds and the run continues),
    NotFound() (evidence nothing changed: the step is marked failed and waits for an explicit
    retry) or Undetermined(reason) (still unknown; the run stays in attention). `looked_up`:
    the verdict is a lookup's by key, whose "not found" may prove nothing yet
    (lookup_verdicts.looked_up_verdict).
    """
    require_evidence(verdict, evidence, f"reconcile {step_name}")
    with operator_transition(run_id, "reconcile", actor=actor, reason=reason, now=now,
                             step_name=step_name) as op:
        run, change, step = op.run, op.change, op.step
        before = audit_state(run, step)
        # A run a person ended while this effect was unknown: settling it never sends the
        # run on; once every effect is settled the run is terminated.
        ended = run.attention_reason == AttentionReason.ENDED_UNSETTLED
        effect = effects.StepEffect(op, step)
        if looked_up:
            verdict = looked_up_verdict(effect, verdict, change.now)
        if isinstance(verdict, definition.NotFound) and effects.settled_not_done(step):
            # The same settlement sent twice (a retried request, two people who read the
            # same unknown step): the first settled it, the second would record again. A
            # step that failed by itself may still be settled as not done, with evidence.
            raise TransitionNotAllowed(
                f"{step_name} of run {run_id} is already settled as not done "
                f"({step.error_message}); nothing changed. Retry the step to send it again "
                "with the same key.")
        data = {"evidence": evidence, **effects.settled_by_person(
            change, effect, verdict, evidence=evidence, reason=reason)}
        if ended:
            end_or_hold(change, unsettled_effects(op.steps),
                        settled=(step_name, data["verdict"]))
        elif isinstance(verdict, definition.Found):
            change.move(QUEUED)
        elif isinstance(verdict, definition.NotFound):
            # Settled: the run's reason no longer says an outcome is unknown.
            change.move(ATTENTION, reason=AttentionReason.SETTLED_NOT_DONE,
                        message=f"{step_name} settled as not done; retry the step to send "
                                "it again with the same key")
        else:
            change.move(ATTENTION, reason=still_unknown_reason(verdict, run.attention_reason,
                                                           looked_up=looked_up),
                        message=f"{step_name}: still undetermined: "
                                f"{getattr(verdict, 'reason', '')}")
        change.audit(AuditAction.RECONCILED, step=step, reason=reason, before=before,
                     after=audit_state(run, step), data=data)
    return run

def retry_step(run_id: int, *, step_name: str, actor: Actor, reason: str,
               now: datetime | None = None) -> Run:
    """Send one failed or scheduled step again with the same idempotency key, with a fresh
    retry budget. A step whose outcome is unknown is refused: reconcile it first."""
    with operator_transition(run_id, "retry_step", actor=actor, reason=reason, now=now,
                             step_name=step_name) as op:
        effects.sent_again_by_person(op.change, effects.StepEffect(op, op.step),
                                     reason=reason, before=audit_state(op.run, op.step))
    return op.run

def compensate(run_id: int, *, actor: Actor, reason: str, data: dict | None = None,
               approved_by: Actor | None = None, now: datetime | None = None) -> Run:
    """Undo the run's completed steps, newest first, each with its own key and audit record.

    Refused while any step's outcome is unknown: whether to undo an action depends on
    whether it happened, so that is settled first. After a high-impact effect it needs a
    second person (`approved_by`). A run whose compensation failed can be compensated
    again: the failed compensation is sent again with the same key.
    """
    with operator_transition(run_id, "compensate", actor=actor, reason=reason, now=now,
                             approved_by=approved_by) as op:
        run, change = op.run, op.change
        plan = compensation_plan(op.steps, op.definition)
        begin_compensation(change, plan, op.steps, reason=reason,
                           data=four_eyes_data(data, approved_by))
        run.next_wake_at = due_at_once(change.now)  # the sweeper finds it if the hint is lost
        change.wake = True
    return run

def confirm_compensation(run_id: int, *, step_name: str, actor: Actor, reason: str,
                         call_ref: str = "", data: dict | None = None,
                         now: datetime | None = None) -> Run:
    """A person confirms the undo at which a compensation paused: of a high-impact step, or
    of one high-impact tool call (`call_ref`, "turn.index") of agent step `step_name`
    (`data` records what they were shown it would send). The compensation carries on with
    it (a call's undo sent once, with its compensation key), then with the older undos.
    Without `call_ref`, the paused undo of `step_name` is the one confirmed, whichever it is;
    with it, it must be that one."""
    with operator_transition(run_id, "confirm_compensation", actor=actor, reason=reason,
                             now=now, step_name=step_name, call_ref=call_ref.strip()) as op:
        run, change, step = op.run, op.change, op.step
        # operator_transition's refusal() made sure the paused undo is this step's.
        paused = paused_undo(run, op.steps, op.definition)
        call, named = paused.call, call_ref.strip()
        if named and (call is None or call.ref != named):
            raise TransitionNotAllowed(
                f"run {run_id} is paused at the undo of {paused}, not of tool call "
                f"{quoted(named)} of {step_name}: confirm the undo it is paused at")
        before = audit_state(run, step)
        if call is not None:
            effect = effects.CallEffect(op, step, call)
            data = effect.data(**(data or {}), key=call.compensation_key)
            # Compensating marks the undo as confirmed: the worker sends it without asking
            # again, also after a crash (compensation.pauses_before_undo).
            call.status = StepStatus.COMPENSATING
            effect.save(change)
        step.status = StepStatus.COMPENSATING
        step.budget_started_at = change.now  # the compensation's own retry budget starts now
        step.next_attempt_at = None
        change.step_changed(step)
        change.move(COMP)
        run.next_wake_at = due_at_once(change.now)
        change.wake = True
        change.audit(AuditAction.COMPENSATION_CONFIRMED, step=step, reason=reason, before=before,
                     after=audit_state(run, step), data=data)
    return run

def ask_again(run_id: int, *, step_name: str, actor: Actor, reason: str,
              now: datetime | None = None) -> Run:
    """Discard a stored model decision so the model is asked again, as a new decision
    version. Refused once a later side-effecting step has acted on the old decision (re-run
    from the decision instead). The later reads and decisions that already ran, on the old
    decision, run again after the new one: their results would be the old decision's. So is
    a later approval granted on it: the person approved what the old decision said, and is
    asked again about the new one. The old decision stays in the audit record."""
    with operator_transition(run_id, "ask_again", actor=actor, reason=reason, now=now,
                             step_name=step_name) as op:
        run, change, step = op.run, op.change, op.step
        before = audit_state(run, step)
        previous = step.result
        version = step.attempt + 1
        run_again = [s for s in op.steps if s.position > step.position
                     and s.kind in (definition.READ, definition.DECISION, definition.APPROVAL)
                     and s.status == StepStatus.SUCCEEDED]
        for discarded in (step, *run_again):
            discarded.status, discarded.result = StepStatus.PENDING, None
            discarded.remote_ref, discarded.finished_at = "", None
            reset_budget(discarded)
            change.step_changed(discarded)
        run.steps_done = sum(1 for s in op.steps if s.status in DONE_STEP_STATUSES)
        run.next_wake_at = None
        change.move(QUEUED)
        change.audit(AuditAction.DECISION_DISCARDED, step=step, reason=reason, before=before,
                     after=audit_state(run, step),
                     data={"previous_decision": previous, "next_version": version,
                           **({"run_again": [s.name for s in run_again]}
                              if run_again else {})})
    return run

def cancel(run_id: int, *, actor: Actor, reason: str, approved_by: Actor | None = None,
           now: datetime | None = None) -> Run:
    """Stop the run at the next step boundary: at once if no step is in flight. After a
    high-impact effect it needs a second person (`approved_by`)."""
    with operator_transition(run_id, "cancel", actor=actor, reason=reason, now=now,
                             approved_by=approved_by) as op:
        run, change = op.run, op.change
        before = audit_state(run)
        data = four_eyes_data(None, approved_by)
        if run.status == RUNNING:
            run.cancel_requested = True
            change.audit(AuditAction.CANCEL_REQUESTED, reason=reason, before=before, after=before,
                         data=data)
        else:
            terminate_in(change, op.steps, reason=reason, action=AuditAction.CANCELLED, data=data)
    return run

def terminate(run_id: int, *, actor: Actor, reason: str, data: dict | None = None,
              approved_by: Actor | None = None, now: datetime | None = None) -> Run:
    """End the run at once. A step still in flight becomes unknown; its result is recorded
    when it arrives. A compensation under way stops there: no undo is left compensating,
    each says what stands (in_flight.undos_left). The run resumes only through reopen. After
    a high-impact effect (one being undone too) it needs a second person (`approved_by`)."""
    with operator_transition(run_id, "terminate", actor=actor, reason=reason, now=now,
                             approved_by=approved_by) as op:
        terminate_in(op.change, op.steps, reason=reason,
                      data=four_eyes_data(data, approved_by))
    return op.run

def reopen(run_id: int, *, actor: Actor, reason: str, now: datetime | None = None) -> Run:
    """Bring a terminated run back to attention, from where an operator can act on it. The
    steps its ending skipped (never reached, or a sleep) are pending again; a wait a person
    skipped before (skip_event, which finished the step) stays skipped."""
    with operator_transition(run_id, "reopen", actor=actor, reason=reason, now=now) as op:
        run, change = op.run, op.change
        before = audit_state(run)
        for step in op.steps:
            # A person skips event waits only. Any other skipped step was the end's, though a
            # run ended under an earlier release may have kept a failed attempt's finished_at.
            by_person = step.kind == definition.EVENT and step.finished_at is not None
            if step.status == StepStatus.SKIPPED and not by_person:
                step.status = StepStatus.PENDING
                change.step_changed(step)
        run.finished_at = None
        change.move(ATTENTION, reason=AttentionReason.REOPENED, message=reason)
        change.audit(AuditAction.REOPENED, reason=reason, before=before, after=audit_state(run))
    return run
