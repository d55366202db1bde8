"""The stop verdict, enforced: a step whose recovery contract cannot be written (a
high-impact effect with no lookup by key and a receiver that ignores keys, see
runs.definitions.contracts.effect_verdict) never runs unattended. Before each of its attempts (the
first, a retry after a transient error, a resend an operator asked for) the run waits for a
person, through the approval steps' own wait: step `waiting`, an ApprovalWait row, and the
approvals app's request, notifications and pages. The approval names the attempt it
allows; decide_approval applies it, and the attempt after that asks again."""

from audit.actions import AuditAction

from ...definitions import definition
from ...definitions.contracts import effect_verdict
from ...models import AttentionReason, ErrorClass, Step, StepStatus
from ..intentions import intended_action
from .kernel import ATTENTION, QUEUED, WAITING, Change, Lease, audit_state

# The run's status message while it waits, and what the approval request shows.
WAIT_MESSAGE = "{step} waits for a person before attempt {attempt}: {reason}"


def is_gated(spec: definition.StepDef) -> bool:
    """Whether each attempt of `spec` waits for a person's approval."""
    return effect_verdict(spec) is not None


def waits_before_attempt(change: Change, lease: Lease, step: Step,
                         spec: definition.StepDef) -> bool:
    """Within the transition that would record `step`'s intent: if the step has the stop
    verdict and its next attempt is not approved, the run waits for a person instead, and
    nothing is sent. True when it waits."""
    verdict = effect_verdict(spec)
    attempt = step.attempt + 1
    if verdict is None or step.approved_attempt == attempt:
        return False
    run = change.run
    before = audit_state(run, step)
    # What it will send, computed now (nothing is called), so the person approves it.
    step.intended_action = intended_action(lease.definition, spec, run, lease.steps, step)
    step.status = StepStatus.WAITING
    step.started_at = step.started_at or change.now
    step.next_attempt_at = None
    change.step_changed(step)
    change.move(WAITING, message=WAIT_MESSAGE.format(step=step.name, attempt=attempt,
                                               reason=verdict.reason))
    change.wait_for_person(step)
    run.next_wake_at = None
    change.audit(AuditAction.APPROVAL_REQUESTED, step=step, before=before,
                 after=audit_state(run, step),
                 data={"verdict": verdict.decision, "why": verdict.reason,
                       "attempt": attempt, "key": step.idempotency_key,
                       "will_do": step.intended_action})
    lease.finished = True
    return True


def apply_decision(change: Change, step: Step, *, approved: bool, by: str,
                   comment: str) -> None:
    """A person's decision on the next attempt of gated `step` (waiting): approved, that
    attempt and no other may run, and the run is queued for it; rejected, the step fails
    for good with nothing sent, and the run goes to attention."""
    attempt = step.attempt + 1
    if approved:
        step.approved_attempt = attempt
        step.status = StepStatus.PENDING if step.attempt == 0 else StepStatus.SCHEDULED
        change.step_changed(step)
        change.move(QUEUED)
        return
    step.status = StepStatus.FAILED
    step.finished_at = change.now
    step.error_class = ErrorClass.PERMANENT
    step.error_message = (f"attempt {attempt} rejected by {by}"
                          f"{': ' + comment if comment else ''}; nothing was sent")
    change.step_changed(step)
    change.move(ATTENTION, reason=AttentionReason.APPROVAL_REJECTED,
                message=f"{step.name}: {step.error_message}")
