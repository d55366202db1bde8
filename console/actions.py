"""The operator actions the console offers: what each is called, who may use it, what it will
do in words, and which transition it calls (the same function automation calls)."""

from dataclasses import dataclass

from approvals.services import four_eyes_required, request_operator_action
from audit.chain import Actor
from runs import definition as d
from runs import transitions
from runs.contracts import step_contract
from runs.definition import Found, NotFound
from runs.models import Run, Step, StepStatus
from runs.reconciliation import reconcile_step

from .permissions import ACTION_PERMISSIONS


class ActionInputError(ValueError):
    """The form for an action is incomplete or inconsistent; nothing was done."""


@dataclass(frozen=True)
class Action:
    name: str
    label: str
    needs_reason: bool
    danger: bool = False

    @property
    def permission(self) -> str:
        return ACTION_PERMISSIONS[self.name]

    def allowed_in(self, run: Run) -> bool:
        return transitions.allowed(self.name, run.status)


ACTIONS = {a.name: a for a in [
    Action("resume", "Resume", needs_reason=False),
    Action("reconcile", "Reconcile", needs_reason=False),
    Action("retry_step", "Retry step", needs_reason=False),
    Action("ask_again", "Ask the model again", needs_reason=True),
    Action("compensate", "Compensate", needs_reason=True, danger=True),
    Action("cancel", "Cancel", needs_reason=True),
    Action("terminate", "Terminate", needs_reason=True, danger=True),
    Action("reopen", "Reopen", needs_reason=True),
]}

RECONCILE_STEP_STATUSES = (StepStatus.UNKNOWN, StepStatus.FAILED)
RETRY_STEP_STATUSES = (StepStatus.FAILED, StepStatus.UNKNOWN, StepStatus.SCHEDULED)


def eligible_steps(action: str, steps: list[Step]) -> list[Step]:
    """The steps an action can be aimed at."""
    if action == "reconcile":
        return [s for s in steps if s.status in RECONCILE_STEP_STATUSES]
    if action == "retry_step":
        return [s for s in steps if s.status in RETRY_STEP_STATUSES]
    if action == "ask_again":
        return [s for s in steps if s.kind == d.DECISION and s.status == StepStatus.SUCCEEDED]
    return []


def explain(action: str, run: Run, steps: list[Step]) -> list[str]:
    """What pressing the button will do, in words, for the confirmation dialog."""
    lines = _explain(action, run, steps)
    if action in ("compensate", "terminate") and any(
            s.impact == d.HIGH and s.kind in (d.WRITE, d.NOTIFY)
            and s.status == StepStatus.SUCCEEDED for s in steps):
        lines.append("This run has a succeeded high-impact step: your request goes to a "
                     "second person for approval (four eyes) and nothing happens until then.")
    return lines


def _explain(action: str, run: Run, steps: list[Step]) -> list[str]:
    workflow = d.registry.get(run.workflow_name, run.workflow_version)
    if action == "resume":
        return ["The run continues from its last checkpoint. A failed or scheduled step is "
                "tried again with a fresh retry budget and the same idempotency key; a step "
                "whose outcome is unknown is looked up by key first, never blindly resent."]
    if action == "reconcile":
        return ["Settles a step whose outcome is unknown: either ask the remote system by "
                "the step's key, or record what you established yourself, with evidence. "
                "Found: the step succeeds and the run continues. Not found: the step is "
                "marked failed and waits for an explicit retry."]
    if action == "retry_step":
        return ["Sends the chosen step again with the same idempotency key and a fresh "
                "retry budget. For an unknown step this skips the lookup: you take "
                "responsibility that sending again is safe."]
    if action == "ask_again":
        return ["Discards the stored model decision of the chosen step and asks the model "
                "again (a new decision version). The old decision is kept in the audit "
                "record. Refused once a later step has acted on the old decision."]
    if action == "compensate":
        plan = transitions.compensation_plan(steps, workflow)
        if not plan:
            return ["There is no completed step to compensate."]
        lines = ["Compensations run in this order (newest completed step first), each with "
                 "its own idempotency key:"]
        for i, step in enumerate(plan, 1):
            impact = " - HIGH IMPACT" if step.impact == d.HIGH else ""
            rule = step_contract(workflow.step(step.name)).rule if workflow else ""
            lines.append(f"{i}. {step.name} ({step.remote_ref or 'no reference'}){impact}"
                         f"{': ' + rule if rule and rule != '-' else ''}")
        lines.append("A compensation that fails leaves the run in compensation_failed.")
        return lines
    if action == "cancel":
        return ["Stops the run at the next step boundary: at once if no step is in flight, "
                "otherwise after the current step's outcome is recorded."]
    if action == "terminate":
        return ["Ends the run now. A step still in flight is marked unknown and its result "
                "is recorded when it arrives. The run can only come back through Reopen."]
    if action == "reopen":
        return ["Brings the terminated run back to attention, from where it can be resumed, "
                "reconciled or compensated."]
    raise KeyError(action)


def perform(action: str, run: Run, *, user, data: dict) -> str:
    """Call the transition behind `action` with the operator's input, and say what was done.
    Compensating or terminating a run with a succeeded high-impact effect becomes a request
    for a second person's approval instead (four eyes). Raises ActionInputError for missing
    input and TransitionNotAllowed if the run's state does not allow it (both leave
    everything as it was)."""
    actor = Actor.for_user(user)
    reason = (data.get("reason") or "").strip()
    spec = ACTIONS[action]
    if spec.needs_reason and not reason:
        raise ActionInputError(f"{spec.label} needs a reason.")
    step = (data.get("step") or "").strip()
    if action == "resume":
        transitions.resume(run.pk, actor=actor, reason=reason)
    elif action == "reconcile":
        if not step:
            raise ActionInputError("Choose the step to reconcile.")
        mode = data.get("mode") or "ask"
        evidence = (data.get("evidence") or "").strip()
        if mode == "ask":
            reconcile_step(run.pk, step_name=step, actor=actor, reason=reason)
        elif mode in ("found", "not_found"):
            if not evidence:
                raise ActionInputError("Recording an outcome by hand needs evidence.")
            if not reason:
                raise ActionInputError("Recording an outcome by hand needs a reason.")
            ref = (data.get("remote_ref") or "").strip()
            if mode == "found" and not ref:
                raise ActionInputError("Give the remote reference of the effect you found.")
            verdict = Found(ref) if mode == "found" else NotFound()
            transitions.reconcile(run.pk, step_name=step, verdict=verdict, actor=actor,
                                  reason=reason, evidence=evidence)
        else:
            raise ActionInputError(f"Unknown reconcile mode {mode!r}.")
    elif action == "retry_step":
        if not step:
            raise ActionInputError("Choose the step to retry.")
        transitions.retry_step(run.pk, step_name=step, actor=actor, reason=reason)
    elif action == "ask_again":
        if not step:
            raise ActionInputError("Choose the decision to ask again.")
        transitions.ask_again(run.pk, step_name=step, actor=actor, reason=reason)
    elif action in ("compensate", "terminate") and four_eyes_required(run, action):
        request, created = request_operator_action(run, action=action, requested_by=user,
                                                   reason=reason)
        return (f"A second person must approve this: approval request {request.pk} "
                f"{'created' if created else 'already waits'}; nothing was done yet.")
    elif action == "compensate":
        transitions.compensate(run.pk, actor=actor, reason=reason)
    elif action == "cancel":
        transitions.cancel(run.pk, actor=actor, reason=reason)
    elif action == "terminate":
        transitions.terminate(run.pk, actor=actor, reason=reason)
    elif action == "reopen":
        transitions.reopen(run.pk, actor=actor, reason=reason)
    else:
        raise ActionInputError(f"Unknown action {action!r}.")
    return f"{spec.label}: done."
