"""A schedule a release renames, declared with renamed_from, starts each slot once across the
rename: it goes on from the old name's last slot handled (a slot that passed between the old
name's last tick and the new name's first is started, not skipped), finds the run of a slot
the old name started instead of starting a second under the new name, keeps the old name's
row in step (a beat still running the previous release starts none of its slots again) and
keeps the old name's pause. Each slot's run is keyed by the name that started it."""

from datetime import UTC, datetime, timedelta

import pytest

from audit.chain import Actor
from runs.models import Run, ScheduleState
from runs.waiting import schedules
from runs.waiting.schedules import Schedule, ScheduleError, fire_schedule
from tests.workflows import nightly

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


def minutely(name: str, **options) -> Schedule:
    return Schedule(nightly, name, every=timedelta(minutes=1), register=False,
                    input=lambda slot: {"slot": slot.isoformat()}, **options)


def runs_by_slot() -> dict[str, list[str]]:
    """Each slot started (its time, HH:MM) and the names that started a run for it."""
    slots: dict[str, list[str]] = {}
    for key in Run.objects.order_by("pk").values_list("business_key", flat=True):
        _, name, slot = key.split(":", 2)
        slots.setdefault(slot[11:16], []).append(name)
    return slots


def old_name_ran_until_0901() -> Schedule:
    old = minutely("daily")
    fire_schedule(old, now=T0)                           # first sight
    fire_schedule(old, now=T0 + timedelta(minutes=1))    # 09:01 started
    return old


def test_a_slot_that_passed_during_the_rename_is_started_once_under_the_new_name():
    old_name_ran_until_0901()
    renamed = minutely("invoices-daily", renamed_from="daily")
    # The release rolls out: 09:02 passes with neither name ticking.
    report = fire_schedule(renamed, now=T0 + timedelta(minutes=2, seconds=10))
    assert len(report.started) == 1 and report.found == []
    fire_schedule(renamed, now=T0 + timedelta(minutes=3))
    assert runs_by_slot() == {"09:01": ["daily"], "09:02": ["invoices-daily"],
                              "09:03": ["invoices-daily"]}


def test_a_slot_the_old_name_started_without_recording_it_is_found_not_started_again():
    old = old_name_ran_until_0901()
    fire_schedule(old, now=T0 + timedelta(minutes=2))    # 09:02 started...
    # ...and its scheduler died before recording it.
    ScheduleState.objects.filter(name="daily").update(
        last_slot_at=datetime(2026, 3, 2, 9, 1, tzinfo=UTC))
    renamed = minutely("invoices-daily", renamed_from="daily")
    report = fire_schedule(renamed, now=T0 + timedelta(minutes=2))
    assert report.started == [] and len(report.found) == 1
    assert runs_by_slot() == {"09:01": ["daily"], "09:02": ["daily"]}
    assert ScheduleState.objects.get(name="invoices-daily").last_slot_at == \
        datetime(2026, 3, 2, 9, 2, tzinfo=UTC)


def test_a_beat_still_running_the_old_release_starts_no_slot_the_new_name_started():
    old = old_name_ran_until_0901()
    renamed = minutely("invoices-daily", renamed_from="daily")
    for minutes in (2, 3):
        # Both releases tick, one after the other, in either order.
        first, second = (renamed, old) if minutes == 2 else (old, renamed)
        fire_schedule(first, now=T0 + timedelta(minutes=minutes))
        fire_schedule(second, now=T0 + timedelta(minutes=minutes))
    assert runs_by_slot() == {"09:01": ["daily"], "09:02": ["invoices-daily"],
                              "09:03": ["daily"]}


def test_a_paused_schedule_stays_paused_under_its_new_name():
    old_name_ran_until_0901()
    registered = minutely("daily")
    schedules.registry.add(registered)
    try:
        schedules.set_paused(workflow="test-scheduled", name="daily", paused=True,
                             actor=Actor.system("test"), reason="quarter close",
                             now=T0 + timedelta(minutes=1, seconds=20))
    finally:
        schedules.registry.remove(registered)
    renamed = minutely("invoices-daily", renamed_from="daily")
    assert fire_schedule(renamed, now=T0 + timedelta(minutes=5)).started == []
    state = ScheduleState.objects.get(name="invoices-daily")
    assert (state.paused, state.pause_reason) == (True, "quarter close")
    assert runs_by_slot() == {"09:01": ["daily"]}


@pytest.mark.parametrize("former", ["invoices-daily", "daily:old", " daily", 7])
def test_a_former_name_no_schedule_could_have_had_is_refused(former):
    with pytest.raises(ScheduleError, match=f"schedule 'invoices-daily': renamed_from must be "
                                            f"its former name, .*not {former!r}"):
        minutely("invoices-daily", renamed_from=former)
