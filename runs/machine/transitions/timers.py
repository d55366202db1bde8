"""Durable timers: a sleep step puts its run to sleep until a time, holding no process.

The run waits with next_wake_at set to the time (the sweeper's run_wake_due_idx finds it
when due); the step waits with next_attempt_at the same. When a worker claims the run at or
after that time, the step succeeds and the run goes on, in the same transition. A person
may wake it early, with a reason (wake_timer): the step's time becomes now. A run that stops
going forward (cancelled, terminated, being undone) skips its sleep (kernel.end_waits): no
wake time is left pending on a run that will not go on.

A sleep's `until` is the workflow's own code, called with the run's input when the run is
started (a start it fails is refused) and again when the run reaches the step
(runs.machine.transitions.wait_functions): a release can make it fail for older runs. The step
then fails as any step whose code raised unexpectedly does, in that same change
(failed_in_its_code), the previous step's success kept; retried once the code is fixed, it
sleeps.
"""

from datetime import datetime, timedelta

from django.db.models import DateTimeField, Value
from django.db.models.functions import Now
from django.db.models.lookups import LessThanOrEqual

from audit.actions import AuditAction
from audit.chain import Actor
from audit.redaction import redact_text

from ... import store
from ...definitions import definition
from ...models import ErrorClass, Run, Step, StepStatus
from ..errors import Classified
from ..storable import printable
from . import effects
from .kernel import (
    QUEUED,
    WAITING,
    Change,
    Lease,
    Outcome,
    audit_state,
    definition_step,
    wait_began,
)
from .operator import operator_transition
from .resends import due_at_once
from .wait_functions import TimeNotKept, WaitFunctionFailed, kept, until_time


def counted_from(lease: Lease, now: datetime) -> datetime:
    """The time a wait's duration (a sleep's, an event wait's timeout) is counted from when
    it begins: the database's clock, read then. `now`, the transition's, is this process's
    estimate of it, which runs an hour behind for a while after this host's clock stepped
    back an hour: counted from it, a wait would end an hour early (at the next sweep, for a
    shorter one). A time the claim was given (a test's) stands in for the clock."""
    return now if lease.clock is not None else store.current().server_now()


def wake_time(spec: definition.StepDef, run: Run, lease: Lease, now: datetime) -> datetime:
    if spec.sleep_for is not None:
        return after(counted_from(lease, now), spec.sleep_for)
    return until_time(spec, run.input)


def after(now: datetime, duration: timedelta) -> datetime:
    """`now` + `duration`, if the database can hold it (kept); TimeNotKept otherwise."""
    try:
        return kept(now + duration)
    except OverflowError:
        raise TimeNotKept(f"now ({now.isoformat()}) + {duration} is past the year 9999") \
            from None


def sleeps(change: Change, lease: Lease, step: Step) -> bool:
    """Put the run to sleep on `step` if its time has not come (True), or say it has come
    (False: the caller records the step's success and goes on)."""
    run, now = change.run, change.now
    if step.status != StepStatus.WAITING or step.next_attempt_at is None:
        try:
            wake_at = wake_time(definition_step(lease, step), run, lease, now)
        except TimeNotKept as exc:
            failed_for_its_time(change, lease, step, "its wake time", exc)
            return True
        except WaitFunctionFailed as exc:
            failed_in_its_code(change, lease, step, exc)
            return True
        if wake_at <= now and due_by_the_database(run, wake_at):
            return False
        before = audit_state(run, step)
        wait_began(step, now)
        step.next_attempt_at = wake_at
        step.lease_owner, step.lease_expires_at = "", None
        change.step_changed(step)
        change.audit(AuditAction.TIMER_STARTED, step=step, before=before,
                     after={"step_status": step.status}, data={"until": wake_at.isoformat()})
    elif reached(lease, step.next_attempt_at, now):
        return False
    change.move(WAITING, message=sleeping_message(step))
    run.next_wake_at = step.next_attempt_at
    lease.finished, lease.work = True, None
    return True


def due_by_the_database(run: Run, when: datetime) -> bool:
    """Whether `when` has come by the database server's clock. This process's estimate of it
    (the transition's now) runs ahead for a while after its own clock stepped forward: judged
    by it, a sleep until a moment from now would end early. Asked only when the estimate says
    the time has come (an until already past), so a sleep for a duration costs no query; a
    sleep the server finds not yet due sleeps, and its claim judges it by the server's clock."""
    return Run.objects.filter(LessThanOrEqual(Value(when, DateTimeField()), Now()),
                              pk=run.pk).exists()


def reached(lease: Lease, when: datetime, now: datetime) -> bool:
    """Whether the time a run already waits until (a sleep's wake time, an event wait's
    deadline) has come at its claim at `now`. A run claimed because that time was due was
    judged by the database's clock already, but one a person resumed was not: its claim's
    `now` is this process's estimate, which runs ahead for a while after its own clock
    stepped, and would end the wait early. So it is asked of the database too (or of the time
    the claim was given), and only when the estimate says the time has come."""
    if when > now:
        return False
    return lease.clock is not None or due_by_the_database(lease.run, when)


def failed_for_its_time(change: Change, lease: Lease, step: Step, what: str,
                        exc: TimeNotKept) -> None:
    """The time `step` would wait until (`what`: a sleep's wake time, an event wait's
    timeout) is one the database cannot hold: the step fails for good, naming it, since every
    worker would compute the same time again, and nothing unreadable is written."""
    effects.fail(change, lease, effects.StepEffect(lease, step), Outcome(
        succeeded=False, error=Classified(ErrorClass.PERMANENT, f"{what} {exc}")))


def failed_in_its_code(change: Change, lease: Lease, step: Step,
                       exc: WaitFunctionFailed) -> None:
    """The workflow's own code for `step` (a sleep's until, an event wait's correlate) raised,
    or gave what the wait cannot use, as the run reached it; the start checked it with the
    same input, so the code changed since (or depends on more than the input). The step
    fails as a step whose code raised unexpectedly does (unclassified_error: fix the code,
    then retry), not as a missing deployment: the code is there, and says what is wrong. In
    the change that reached the step: raised on, the error would roll back the previous
    step's success with this change and the run would go round its lease again and again,
    every worker failing the same way; failed, that success commits and nothing else is
    called. Retried after the code is fixed, the step calls it again and goes on."""
    error = printable(redact_text(str(exc)))[:2000]
    effects.fail(change, lease, effects.StepEffect(lease, step), Outcome(
        succeeded=False, error=Classified(ErrorClass.UNCLASSIFIED, error)))


def sleeping_message(step: Step) -> str:
    return f"{step.name}: sleeping until {step.next_attempt_at:%Y-%m-%d %H:%M:%S %Z}"


def sleeping_step(steps: list[Step]) -> Step | None:
    """The sleep step a waiting run sleeps on, if it does."""
    return next((s for s in steps if s.kind == definition.SLEEP and s.status == StepStatus.WAITING),
                None)


def wake_timer(run_id: int, *, actor: Actor, reason: str, now: datetime | None = None) -> Run:
    """Wake a run sleeping on a timer now, before its time; the sleep step then succeeds at
    the next claim and the run goes on."""
    with operator_transition(run_id, "wake_timer", actor=actor, reason=reason,
                             now=now) as op:
        run, change = op.run, op.change
        step = sleeping_step(op.steps)
        before = audit_state(run, step)
        planned = step.next_attempt_at
        # At once as every go-on-now is: a worker whose estimate of the database's clock is
        # behind this process's would find the timer not yet due and sleep again.
        step.next_attempt_at = due_at_once(change.now)
        change.step_changed(step)
        run.next_wake_at = None
        change.move(QUEUED)
        change.audit(AuditAction.TIMER_WOKEN, step=step, reason=reason, before=before,
                     after=audit_state(run, step),
                     data={"planned": planned.isoformat() if planned else None})
    return run
