"""The transitions of an approval step: a person's decision, or nobody deciding in time.
The approvals app calls them once a decision is recorded on its request."""

from datetime import datetime

from django.db.models import Q

from audit.actions import AuditAction
from audit.chain import Actor
from audit.models import AuditRecord
from audit.redaction import redact_text

from ... import store
from ...definitions import definition
from ...models import (
    AttentionReason,
    ErrorClass,
    Run,
    Step,
    StepStatus,
)
from ..errors import (
    Classified,
    SecondPersonRequired,
    TransitionNotAllowed,
)
from . import effects, stop_gate
from .kernel import (  # the package's shared vocabulary
    ATTENTION,
    QUEUED,
    Change,
    audit_state,
    lock_run,
    step_named,
    steps_done_with,
    transition_on,
    transition_time,
    wait_ended,
)
from .operator_rules import decision_refusal


def approved_reference(by: str) -> str:
    """What an approved approval step keeps as its reference: who approved it (a person's
    label, or approval_rules.BY_RULE), the same words whoever it was."""
    return f"approved by {by}"


def decide_approval(run_id: int, *, step_name: str, approved: bool, actor: Actor,
                    comment: str = "", data: dict | None = None,
                    now: datetime | None = None) -> Run:
    """Record a person's decision on the approval step the run waits on.

    Approved: the step succeeds and the run continues. Rejected: the step fails and the run
    waits for an operator in attention (rejection is a business outcome, not an error to
    retry). The attempt of a step with the stop verdict is never decided by the person who
    sent it again (step_sent_again_by), as a resent tool call's is not
    (agent_operator.decide_tool_call), whoever calls this.
    """
    with transition_on(run_id, "decide_approval", actor=actor, now=now,
                       refused=decision_refusal) as change:
        run, now = change.run, change.now
        step = _waiting_approval(run, step_name)
        if step.kind != definition.APPROVAL:
            if actor.user_id is not None and actor.user_id == step_sent_again_by(run.pk,
                                                                                step_name):
                raise SecondPersonRequired(
                    f"{actor.label} sent {step_name} again: a second person decides the "
                    "approval of that attempt")
            # The approval of one attempt of a step with the stop verdict, applied as a tool
            # call's is; it reads no spec, so no definition.
            effects.decided_by_person(change, effects.StepEffect(None, step),
                                      approved=approved, by=actor.label, comment=comment,
                                      **(data or {}))
            return run
        before = audit_state(run, step)
        step.finished_at = now
        step.result = {"approved": approved, "by": actor.label, "comment": comment}
        if approved:
            step.status = StepStatus.SUCCEEDED
            step.remote_ref = approved_reference(actor.label)
            wait_ended(step)
            change.step_changed(step)
            run.steps_done = steps_done_with(run, step)
            change.move(QUEUED)
        else:
            step.status = StepStatus.FAILED
            step.error_message = f"rejected by {actor.label}: {comment}"
            change.step_changed(step)
            change.move(ATTENTION, reason=AttentionReason.APPROVAL_REJECTED,
                        message=f"{step_name} rejected by {actor.label}")
        change.audit(AuditAction.APPROVAL_DECIDED, step=step, reason=comment, before=before,
                     after=audit_state(run, step), data={**(data or {}), "approved": approved})
    return run

def step_sent_again_by(run_id: int, step_name: str) -> int | None:
    """The user id of the operator who sent the attempt that step `step_name` (one with the
    stop verdict) now waits to have approved, or None. Read from the run's audit log: a
    Retry step of that step, or a Resume of the run (which sends a failed step again), by a
    person, since the decision on its previous attempt. Before the first decision nothing
    was sent yet, so only a Retry step counts; a Resume then was of some earlier stop. Four
    eyes: that person does not decide the approval the attempt waits for."""
    records = AuditRecord.objects.filter(run_id=run_id)
    decided = (records.filter(action=AuditAction.APPROVAL_DECIDED, step_name=step_name)
               .order_by("-seq").values_list("seq", flat=True).first())
    sent = Q(action=AuditAction.STEP_RETRIED, step_name=step_name)
    if decided is not None:
        sent = (sent | Q(action=AuditAction.RESUMED)) & Q(seq__gt=decided)
    return (records.filter(sent, actor_user_id__isnull=False).order_by("-seq")
            .values_list("actor_user_id", flat=True).first())


def _waiting_approval(run: Run, step_name: str) -> Step:
    step = step_named(run, step_name)
    gated = step.kind in (definition.WRITE, definition.NOTIFY) and _gated(run, step_name)
    if (step.kind != definition.APPROVAL and not gated) or step.status != StepStatus.WAITING:
        raise TransitionNotAllowed(
            f"step {step_name} of run {run.pk} is not an approval waiting for a decision "
            f"({step.kind}, {step.status})")
    return step

def _gated(run: Run, step_name: str) -> bool:
    workflow_def = definition.registry.get(run.workflow_name, run.workflow_version)
    spec = definition.step_of(workflow_def, step_name)
    return spec is not None and stop_gate.is_gated(spec)

def approval_timed_out(run_id: int, *, step_name: str, actor: Actor, reason: str,
                       now: datetime | None = None) -> Run:
    """Nobody decided the approval in time and its policy is to cancel: the run goes to
    attention, the step still waiting, for an operator to decide what happens."""
    with transition_on(run_id, "approval_timed_out", actor=actor, now=now) as change:
        run = change.run
        step = _waiting_approval(run, step_name)
        before = audit_state(run, step)
        change.move(ATTENTION, reason=AttentionReason.APPROVAL_TIMED_OUT,
                    message=f"{step_name}: {reason}")
        change.audit(AuditAction.APPROVAL_TIMED_OUT, step=step, reason=reason, before=before,
                     after=audit_state(run, step))
    return run


def approval_unaskable(run_id: int, *, step_name: str, actor: Actor, why: str,
                       tool_call: str | None = None, error: Classified | None = None,
                       now: datetime | None = None) -> Run:
    """The approval `step_name` waits on cannot be asked for, an approval step's or, with
    `tool_call` (its ref), one of its agent's tool calls' (the snapshot cannot be made: the
    code changed under the run, a release removed the tool or its approvers, a snapshot
    function fails): with no request nobody could ever decide it, so the run waits for a
    person in attention, the step (and the call) still waiting. Resumed, it waits for the
    approval again, and its request is tried anew.

    `error`: the snapshot's failure as errors.classify reads it. A sealed value it could not
    open (ErrorClass.UNREADABLE) holds the run as a step or a tool call is held for one
    (effects.fail): sealed_value_unreadable, in the classified words that name the key and
    its cure, for the cure is the key ring, not the code."""
    with transition_on(run_id, "approval_unaskable", actor=actor, now=now) as change:
        run = change.run
        step = step_named(run, step_name)
        if step.status != StepStatus.WAITING:
            raise TransitionNotAllowed(f"step {step_name} of run {run_id} no longer waits "
                                       f"({step.status})")
        what = step_name + (f" tool call {tool_call}" if tool_call else "")
        before = audit_state(run, step)
        if error is not None and error.error_class == ErrorClass.UNREADABLE:
            # Nothing waits on a request that was never made: nothing needing it was sent.
            reason = AttentionReason.SEALED_VALUE_UNREADABLE
            why = f"{error.message}; {effects.NOTHING_SENT}"
        else:
            reason = AttentionReason.APPROVAL_UNASKABLE
        change.move(ATTENTION, reason=reason,
                    message=f"{what}: no approval request can be made: {redact_text(why)}")
        change.audit(AuditAction.APPROVAL_UNASKABLE, step=step, before=before,
                     after=audit_state(run, step),
                     data={"tool_call": tool_call} if tool_call else None)
    return run


# What the approvals app records on the run's chain about a request, besides a decision
# that moves the run: a second person's decision on an operator action that is not taken
# (rejected, nobody decided in time, or refused when applied) moves nothing but is said.
APPROVAL_EVIDENCE = frozenset({
    AuditAction.APPROVAL_OPENED, AuditAction.APPROVAL_REMINDED, AuditAction.APPROVAL_ESCALATED,
    AuditAction.APPROVAL_SUPERSEDED, AuditAction.APPROVAL_WITHDRAWN, AuditAction.APPROVAL_DECIDED,
})


def record_approval_event(run_id: int, *, action: str, step_name: str, actor: Actor,
                          reason: str = "", data: dict | None = None,
                          now: datetime | None = None) -> None:
    """Append an approval request's lifecycle event (opened, reminded, escalated,
    superseded, withdrawn) to the run's hash-chained audit log, changing no state.

    Not durable on purpose: it joins the caller's transaction, so the event commits with
    the request row it describes, or not at all."""
    if action not in APPROVAL_EVIDENCE:
        raise ValueError(f"{action!r} is not an approval lifecycle event")
    with store.current().transaction(durable=False):
        run = lock_run(run_id)
        change = Change(run, None, actor, transition_time(now))
        change.audit(action, step_name=step_name, reason=reason, data=data)
        change.save()
