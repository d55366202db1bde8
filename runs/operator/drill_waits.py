"""What the drill kit does when a drill run waits on the world rather than on a person: it
wakes a timer, as an operator may, instead of sleeping it out; an event it cannot give (only
the event's sender knows its payload), so the drill's row says what the run waits for,
instead of the drill spinning on the run until its time runs out."""

from datetime import timedelta

from django.utils import timezone

from audit.chain import Actor

from ..machine import transitions
from ..models import Run, RunStatus


def woke(run: Run, *, actor: Actor) -> bool:
    """Wake the timer `run` sleeps on now, as `actor` (True); False if it sleeps on none."""
    run.refresh_from_db()
    if run.status != RunStatus.WAITING \
            or transitions.sleeping_step(list(run.steps.all())) is None:
        return False
    transitions.wake_timer(run.pk, actor=actor, reason="drill: wake the timer now")
    return True


def waits_for_an_event_past(run: Run, seconds: float) -> bool:
    """Whether `run` waits for an event that no timeout of its own ends within `seconds`
    (one that does, the drill may wait out: its policy then applies)."""
    step = transitions.waiting_event_step(list(run.steps.all()))
    return step is not None and (step.next_attempt_at is None or step.next_attempt_at
                                 > timezone.now() + timedelta(seconds=seconds))


def unreached(run: Run) -> str:
    """Why a drill's crashing worker stopped short of its crash point, as `run` says it."""
    run.refresh_from_db()
    return "the worker never reached the crash point" + (
        f" (run {run.status}: {run.status_message})" if run.status_message else "")
