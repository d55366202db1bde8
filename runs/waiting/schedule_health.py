"""A schedule whose ticks fail, said to people once, and its recovery.

A tick of a schedule fails when it raises (its input function, a slot past the end of the
calendar) or when every slot it had to start was refused (an input its workflow's schema
refuses). Beat ticks every few seconds, so a broken schedule fails again and again: its
row (ScheduleState) holds since when, how many ticks in a row and the last error, for the
schedules page, `manage.py schedules list` and the metric an alert reads
(durable_schedule_failing). The first failing tick after a healthy one writes one
"schedule_failing" control record and logs at ERROR; the ticks after it only count, and log
at WARNING. The first tick that starts (or finds) a run again clears the row and writes one
"schedule_recovered" record. A tick with nothing due changes nothing: a schedule whose slot
was refused an hour ago is failing until its next slot says otherwise.

A schedule whose last slot handled lies ahead of the database's clock (the clock was set
back, the row edited) starts nothing until the clock gets there: that is trouble of the same
kind, kept on the same row (`ahead_of_clock` says which), said once by a "schedule_failing"
record and one WARNING line; the ticks after it only update how far ahead. The first tick
that finds the clock caught up clears it, with one "schedule_recovered" record, without
waiting for a run. A tick replayed at a past time (`schedules tick --now`) judges this by the
database's clock too, not by its own time: the slots handled since that time are not ahead
of any clock.

A paused schedule does not tick, so its trouble is left out of the metric while it is paused
(observability), and resuming it forgets the trouble (`forget_trouble`): its next tick says
again whether it fails.

The records are control records (ControlRecord), as a schedule's pause is: they are about a
workflow's schedule, not one run, so they belong in no run's audit chain. They are dated when
written, by the database's clock, whatever time a tick is given.
"""

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F

from audit.chain import Actor
from audit.redaction import redact_text

from .. import store
from ..machine.storable import printable, written_visibly
from ..models import ControlRecord, ScheduleState

logger = logging.getLogger(__name__)

FAILING = "schedule_failing"
RECOVERED = "schedule_recovered"
SCHEDULER = Actor.system("scheduler")
# How far a tick time given by hand (`schedules tick --now`) may run ahead of the database
# clock: enough for a host whose clock drifts a little, never so far that slots the clock has
# not reached are recorded as handled (the schedule would then start nothing until then).
TICK_AHEAD_ALLOWANCE = timedelta(minutes=1)
# An error is a sentence for a person, not a traceback (that is in the log): kept this long.
ERROR_TEXT_MAX = 500


def error_text(text: str) -> str:
    """`text` (an error from the schedule's own code: it may hold anything) as it is kept and
    shown: credentials masked, what the database cannot store and every control character
    written out visibly, on one line, at most ERROR_TEXT_MAX characters."""
    text = printable(redact_text(text))
    # On one line (a terminal running `schedules list`, a log line), reading as it is.
    text = written_visibly(text)
    return text if len(text) <= ERROR_TEXT_MAX else f"{text[:ERROR_TEXT_MAX - 3]}..."


def tick_failed(state: ScheduleState, *, error: str, now: datetime,
                exc: BaseException | None = None) -> None:
    """Record that this tick of `state`'s schedule failed with `error`."""
    text = error_text(error)
    with transaction.atomic():
        # Locked, so two schedulers failing at once count two ticks and write one record.
        current = ScheduleState.objects.select_for_update().get(pk=state.pk)
        first = current.failing_since is None
        changes = {"failures": current.failures + 1, "last_error": text, "updated_at": now}
        if first:
            changes["failing_since"] = now
        ScheduleState.objects.filter(pk=state.pk).update(**changes)
        if first:
            record(state, action=FAILING, reason=text)
    if first:
        # The traceback once, here; the error text is masked, the log's formatter masks
        # the traceback.
        logger.error("schedule %s of %s is failing: %s", state.name, state.workflow_name,
                     text, exc_info=exc)
    else:
        logger.warning("schedule %s of %s still failing (%d ticks in a row): %s", state.name,
                       state.workflow_name, changes["failures"], text)


def tick_succeeded(state: ScheduleState, *, now: datetime) -> None:
    """Record that this tick of `state`'s schedule started or found its runs: a failing
    schedule has recovered. `state` is the row as the tick read it: a healthy one costs
    nothing more."""
    if state.failing_since is not None:
        recovered(state, still={"failing_since__isnull": False}, now=now, reason=lambda current: (
            f"a tick started its runs again after {current.failures} failed tick(s) since "
            f"{current.failing_since.isoformat()}"))


def recovered(state: ScheduleState, *, still: dict, now: datetime,
              reason: Callable[[ScheduleState], str]) -> None:
    """Clear `state`'s trouble and write its one "schedule_recovered" record, with
    `reason(the row as locked)`, if the row still has the trouble (`still`: its condition);
    another scheduler may have recorded it first, or a resume cleared it."""
    with transaction.atomic():
        current = ScheduleState.objects.select_for_update().filter(pk=state.pk, **still).first()
        if current is None:
            return
        ScheduleState.objects.filter(pk=state.pk).update(
            failing_since=None, failures=0, last_error="", ahead_of_clock=False,
            updated_at=now)
        said = reason(current)
        record(state, action=RECOVERED, reason=said)
    logger.info("schedule %s of %s recovered: %s", state.name, state.workflow_name, said)


def ahead_of_clock(state: ScheduleState, *, clock: datetime) -> timedelta | None:
    """How far the last slot handled lies ahead of `clock`, the database's clock, when it is
    further than a drifting clock explains (the clock was set back, the row edited): the
    schedule starts nothing until then. None otherwise. Never judged against a replayed tick's
    time: every slot handled since that time lies ahead of it, and is not trouble."""
    if state.last_slot_at is None or state.last_slot_at <= clock + TICK_AHEAD_ALLOWANCE:
        return None
    return state.last_slot_at - clock


def record(state: ScheduleState, *, action: str, reason: str) -> None:
    """Write the scheduler's control record `action` about `state`'s schedule. Dated when it
    is written, by the database's clock: a replayed tick's time is the time of the slots it
    handles, and dating its records so would put them before the records already written."""
    ControlRecord.objects.create(
        action=action, workflow_name=state.workflow_name, target=state.name,
        actor_label=SCHEDULER.label, actor_user_id=SCHEDULER.user_id, reason=reason,
        created_at=store.current().now())


def connection_lost(exc: BaseException, *, name: str, workflow: str, started: int) -> None:
    """Say, in one line, that the tick's database session ended at schedule `name` of
    `workflow`, after `started` runs: the schedule is not failing, and nothing is recorded on
    its row (the session is gone). What the tick had not started is still due and the next
    tick starts it; a run started before its slot was recorded is found then, not started
    again (its business key is the slot's)."""
    said = str(exc).strip() or type(exc).__name__
    logger.error("schedules: the database connection was lost at schedule %s of %s, after "
                 "%d run(s) started in this tick (%s); the tick is stopped, the next one "
                 "fires what is still due", name, workflow, started, said.splitlines()[0])


def ahead_text(last_slot: datetime, ahead: timedelta) -> str:
    return (f"its last slot handled ({last_slot.isoformat()}) is ahead of the clock by "
            f"{ahead.total_seconds():.0f} s: it starts nothing until the clock gets there; "
            "pause and resume it to go on from now")


def slot_ahead(state: ScheduleState, *, ahead: timedelta, now: datetime) -> None:
    """Record that `state`'s last slot handled lies `ahead` of the clock at this tick."""
    text = ahead_text(state.last_slot_at, ahead)
    if state.ahead_of_clock:
        # Said already: only how far ahead it is now, and one more tick in a row.
        ScheduleState.objects.filter(pk=state.pk, ahead_of_clock=True).update(
            failures=F("failures") + 1, last_error=text, updated_at=now)
        return
    with transaction.atomic():
        # Locked, so two schedulers seeing it at once write one record.
        current = ScheduleState.objects.select_for_update().get(pk=state.pk)
        if current.ahead_of_clock:
            return
        ScheduleState.objects.filter(pk=state.pk).update(
            ahead_of_clock=True, failing_since=current.failing_since or now,
            failures=current.failures + 1, last_error=text, updated_at=now)
        record(state, action=FAILING, reason=text)
    logger.warning("schedule %s of %s: %s", state.name, state.workflow_name, text)


def clock_caught_up(state: ScheduleState, *, now: datetime) -> None:
    """Record that the clock has caught up with the last slot of `state`, which was ahead of
    it. `state` is the row as the tick read it: one never ahead costs nothing more."""
    if state.ahead_of_clock:
        recovered(state, still={"ahead_of_clock": True}, now=now, reason=lambda current: (
            f"the clock caught up with its last slot handled "
            f"({current.last_slot_at.isoformat()}) after {current.failures} tick(s) since "
            f"{current.failing_since.isoformat()}"))


def forget_trouble(state: ScheduleState) -> bool:
    """Clear the trouble of `state` (a row locked by the caller, who saves it) as its resume
    does: a paused schedule did not tick, so what its last ticks said no longer holds, and
    its next tick says again. Returns whether it had any."""
    had = state.failing_since is not None
    state.failing_since, state.failures, state.last_error = None, 0, ""
    state.ahead_of_clock = False
    return had
