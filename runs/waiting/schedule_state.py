"""A schedule's row (ScheduleState): made on the schedule's first tick, moved forward as its
slots are handled, taken over from the old name's row when a release renamed the schedule.

A slot's run is keyed by the schedule's name (`schedule:<name>:<slot>`) and the slots handled
are kept under that name. Renamed without saying so, the new name is a new schedule: it
starts from the slot before its first tick, so a slot that passed between the old name's last
tick and that one is skipped (and firing it could start a second run for a slot the old name
had started, under another key). Declared with `renamed_from="old"`, the new name:
  - starts from the old name's row: its last slot handled (the slots in between are due, and
    the catch-up policy decides about them as after any downtime) and its pause (a person
    paused it; a release does not resume it);
  - counts a slot whose run the old name started as found, never starts it again: the old
    name's scheduler may have died between starting it and recording it, or a beat still
    running the previous release may have started it meanwhile;
  - moves the old name's last slot handled on with its own, so that such a beat (or a
    rollback) starts none of the slots the new name has handled.
Ticks run one at a time (runs.machine.single_pass), so a slot is looked for under the old
name and started under the new one by one scheduler, never two at once. Keep renamed_from
until no process runs a release that knows the old name.
"""

from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Q

from ..machine.storable import has_control_characters, text_problem
from ..models import Run, ScheduleState

NAME_MAX = ScheduleState._meta.get_field("name").max_length


def state_of(schedule, *, now: datetime) -> ScheduleState:
    """The schedule's row; made on first sight from the old name's row, or else with the slot
    before now as handled (a new schedule starts with its next slot, it does not run its
    past)."""
    state = ScheduleState.objects.filter(workflow_name=schedule.workflow_name,
                                         name=schedule.name).first()
    if state is not None:
        return state
    begins = _old_name_row(schedule) or {}
    if begins.get("last_slot_at") is None:
        begins["last_slot_at"] = handled_up_to(schedule, now)
    try:
        with transaction.atomic():
            return ScheduleState.objects.create(
                workflow_name=schedule.workflow_name, name=schedule.name, created_at=now,
                updated_at=now, **begins)
    except IntegrityError:  # another scheduler made it first
        return ScheduleState.objects.get(workflow_name=schedule.workflow_name,
                                         name=schedule.name)


def handled_up_to(schedule, now: datetime) -> datetime:
    """Where a schedule that does not run its past goes on from: its last slot before now, or
    now when it had none in the last year (a cron of 29 February). Left empty, every tick
    would look for slots after its own time, and the next slot would never be due."""
    return schedule.latest_slot(now) or now


def _old_name_row(schedule) -> dict | None:
    if not schedule.renamed_from:
        return None
    return ScheduleState.objects.filter(
        workflow_name=schedule.workflow_name, name=schedule.renamed_from,
    ).values("last_slot_at", "last_run_id", "paused", "pause_reason", "paused_by").first()


def run_under_old_name(schedule, slot: datetime) -> int | None:
    """The run the old name started for `slot`, if the schedule was renamed and it did."""
    if not schedule.renamed_from:
        return None
    return Run.objects.filter(
        workflow_name=schedule.workflow_name,
        business_key=schedule.business_key(slot, name=schedule.renamed_from),
    ).values_list("pk", flat=True).first()


def record_progress(schedule, state: ScheduleState, *, slot: datetime, run_id: int | None,
                    now: datetime) -> None:
    """`slot` handled: the row moves forward to it, and so does the old name's row."""
    changes = {"last_slot_at": slot, "updated_at": now}
    if run_id is not None:
        changes["last_run_id"] = run_id
    # Forward only: a slower scheduler that handled older slots never moves it back.
    forward = Q(last_slot_at__lt=slot) | Q(last_slot_at__isnull=True)
    ScheduleState.objects.filter(forward, pk=state.pk).update(**changes)
    if schedule.renamed_from:
        ScheduleState.objects.filter(forward, workflow_name=schedule.workflow_name,
                                     name=schedule.renamed_from).update(
            last_slot_at=slot, updated_at=now)


def valid_name(name) -> bool:
    # A slot's business key is "schedule:<name>:<slot>": a ':' would be read as the slot's,
    # and a start refuses a key of control characters or text the database cannot store. The
    # schedule's state row keeps the name, at most NAME_MAX characters.
    return (isinstance(name, str) and bool(name) and ":" not in name and name == name.strip()
            and len(name) <= NAME_MAX and text_problem(name) is None
            and not has_control_characters(name))
