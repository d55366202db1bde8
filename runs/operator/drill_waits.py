"""What the drill kit does when a drill run waits on the world: it carries the run through,
as the drill, by the transitions a person would use, so that the crash points behind the wait
are reached and every step after it is drilled. What waits for a person (an approval step, a
step with the stop verdict, an agent's tool call) is approved; an awaited event is skipped
(only the event's sender knows its payload, and a skip is what an operator does when it will
not come: the steps after it run without its result); a timer is woken, as an operator may.
Each is recorded in the run's audit chain under the drill's name, as any decision is."""

from collections.abc import Callable

from audit.chain import Actor

from ..machine import transitions
from ..models import Run, RunStatus


def carried_through(run: Run, *, actor: Actor,
                    approver: Callable[[Run], bool] | None) -> bool:
    """Move drill run `run` past what it waits for, as `actor`: a person's approval through
    `approver` (the approvals app's, which decides the approval request), or without one
    straight through the transitions; an event skipped; a timer woken. True if a decision,
    skip or wake-up was recorded (the run can be advanced again); False if it waits for none
    of them, or the approver recorded nothing this time."""
    if not run.drill:
        # Nothing real is ever approved, skipped or woken by the drill.
        raise ValueError(f"run {run.pk} ({run.business_key}) is not a drill run; the drill "
                         "ends none of its waits")
    run.refresh_from_db()
    if run.status != RunStatus.WAITING:
        return False
    if waits_for_person(run):
        return approver(run) if approver is not None else _approved(run, actor=actor)
    steps = list(run.steps.all())
    if transitions.waiting_event_step(steps) is not None:
        transitions.skip_event(run.pk, actor=actor,
                               reason="drill: nobody sends a drill run its event")
        return True
    if transitions.sleeping_step(steps) is not None:
        transitions.wake_timer(run.pk, actor=actor, reason="drill: wake the timer now")
        return True
    return False


def waits_for_person(run: Run) -> bool:
    """Whether `run` waits for a person's decision: an approval step, an attempt of a step
    with the stop verdict, or a tool call (each waits with its ApprovalWait row)."""
    return run.approval_waits.exists()


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
