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

The records are control records (ControlRecord), as a schedule's pause is: they are about a
workflow's schedule, not one run, so they belong in no run's audit chain.
"""

import logging
from datetime import datetime

from django.db import transaction

from audit.chain import Actor

from ..machine.redaction import redact_text
from ..machine.storable import printable, written_visibly
from ..models import ControlRecord, ScheduleState

logger = logging.getLogger(__name__)

FAILING = "schedule_failing"
RECOVERED = "schedule_recovered"
SCHEDULER = Actor.system("scheduler")
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
            ControlRecord.objects.create(
                action=FAILING, workflow_name=state.workflow_name, target=state.name,
                actor_label=SCHEDULER.label, actor_user_id=SCHEDULER.user_id, reason=text,
                created_at=now)
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
    if state.failing_since is None:
        return
    with transaction.atomic():
        current = ScheduleState.objects.select_for_update().filter(
            pk=state.pk, failing_since__isnull=False).first()
        if current is None:  # another scheduler recorded the recovery
            return
        ScheduleState.objects.filter(pk=state.pk).update(
            failing_since=None, failures=0, last_error="", updated_at=now)
        reason = (f"a tick started its runs again after {current.failures} failed tick(s) "
                  f"since {current.failing_since.isoformat()}")
        ControlRecord.objects.create(
            action=RECOVERED, workflow_name=state.workflow_name, target=state.name,
            actor_label=SCHEDULER.label, actor_user_id=SCHEDULER.user_id, reason=reason,
            created_at=now)
    logger.info("schedule %s of %s recovered: %s", state.name, state.workflow_name, reason)
