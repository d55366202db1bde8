"""What the drill kit does when a drill run waits on the world: it carries the run through,
as the drill, by the transitions a person would use, so that the crash points behind the wait
are reached and every step after it is drilled. What waits for a person (an approval step, a
step with the stop verdict, an agent's tool call) is approved; an awaited event whose wait
declares a default (on_timeout="continue", default=...) is delivered with that default, by a
person's "Deliver event", as its timeout would deliver it; a timer is woken, as an operator may.
Each is recorded in the run's audit chain under the drill's name, as any decision is.

An event whose wait declares no default is not made up: only its sender knows its payload,
and a skip would run the steps after it without the result they read, a crash of the drill's
own making reported as the workflow's. The drills behind such a wait are not exercised
(event_not_made_up says why)."""

from collections.abc import Callable

from audit.chain import Actor

from ..definitions import definition
from ..machine import transitions
from ..models import Run, RunStatus, Step


def carried_through(run: Run, *, actor: Actor,
                    approver: Callable[[Run], bool] | None) -> bool:
    """Move drill run `run` past what it waits for, as `actor`: a person's approval through
    `approver` (the approvals app's, which decides the approval request), or without one
    straight through the transitions; an event its wait declares a default for delivered
    with it; a timer woken. True if a decision, delivery or wake-up was recorded (the run can
    be advanced again); False if it waits for none of them (an event without a default among
    them: event_not_made_up), or the approver recorded nothing this time."""
    if not run.drill:
        # Nothing real is ever approved, delivered or woken by the drill.
        raise ValueError(f"run {run.pk} ({run.business_key}) is not a drill run; the drill "
                         "ends none of its waits")
    run.refresh_from_db()
    if run.status != RunStatus.WAITING:
        return False
    if waits_for_approval(run):
        return approver(run) if approver is not None else _approved(run, actor=actor)
    steps = list(run.steps.all())
    if (event := transitions.waiting_event_step(steps)) is not None:
        spec = _declared_wait(run, event)
        if spec is None or not _declares_default(spec):
            return False
        transitions.deliver_event_by_hand(
            run.pk, payload=spec.default, actor=actor,
            reason="drill: the default the wait declares, as its timeout would deliver it")
        return True
    if transitions.sleeping_step(steps) is not None:
        transitions.wake_timer(run.pk, actor=actor, reason="drill: wake the timer now")
        return True
    return False


def event_not_made_up(run: Run) -> str | None:
    """Why the drill stops at what `run` waits for: an event whose wait declares no default,
    which the drill does not make up. None if it waits for no such event."""
    run.refresh_from_db()
    if run.status != RunStatus.WAITING:
        return None
    event = transitions.waiting_event_step(list(run.steps.all()))
    if event is None:
        return None
    spec = _declared_wait(run, event)
    if spec is not None and _declares_default(spec):
        return None
    name = spec.event_name if spec is not None else transitions.awaited(event)[0]
    return (f"the run waits for event {name}, which a drill does not make up (declare "
            "on_timeout='continue' with a timeout and a default to drill past it)")


def _declared_wait(run: Run, step: Step) -> definition.StepDef | None:
    return transitions.declared_wait(
        definition.registry.get(run.workflow_name, run.workflow_version), step)


def _declares_default(spec: definition.StepDef) -> bool:
    # What its timeout stores as the step's result: an event's payload is never null.
    return spec.on_timeout == "continue" and spec.default is not None


def waits_for_approval(run: Run) -> bool:
    """Whether `run` waits for a person's approval (an approval step, an attempt of a step
    with the stop verdict, a tool call), by the rule Resume's refusal reads
    (transitions.awaited_approval); the ApprovalWait rows the drill then decides on are
    written in the transaction that makes such a step wait."""
    return transitions.awaited_approval(run, list(run.steps.all())) is not None


def _approved(run: Run, *, actor: Actor) -> bool:
    # Without the approvals app: the transitions its decisions apply, called directly.
    calls = transitions.waiting_tool_calls(run)
    if calls:
        # Bound to the arguments' hash, as a person's approval of what they saw is.
        transitions.decide_tool_call(run.pk, step_name=calls[0].step.name,
                                     call_ref=calls[0].ref, args_hash=calls[0].args_hash,
                                     approved=True, actor=actor,
                                     comment="approved by the drill")
        return True
    wait = run.approval_waits.filter(tool_call__isnull=True).order_by("pk").first()
    if wait is None:
        return False
    transitions.decide_approval(run.pk, step_name=wait.step_name, approved=True, actor=actor,
                                comment="approved by the drill")
    return True


def unreached(run: Run) -> str:
    """Why a drill's crashing worker stopped short of its crash point, as `run` says it."""
    run.refresh_from_db()
    return "the worker never reached the crash point" + (
        f" (run {run.status}: {run.status_message})" if run.status_message else "")
