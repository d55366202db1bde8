"""A schedule first seen with no slot in the year before (a cron of 29 February, three years
out of four) goes on from the time it was first seen: its next slot runs when it comes. Its
row kept no last slot, and every tick looked for slots after its own time, so the slot was
never due. The same after a resume, and for a row an earlier release left so."""

from datetime import UTC, datetime, timedelta

import pytest

from audit.chain import Actor
from runs.models import Run, ScheduleState
from runs.waiting import schedules
from runs.waiting.schedules import Schedule, fire_schedule
from tests.workflows import nightly

pytestmark = pytest.mark.django_db
FIRST_SEEN = datetime(2026, 12, 1, tzinfo=UTC)            # the last 29 February: 2024
LEAP_DAY = datetime(2028, 2, 29, 6, 0, 4, tzinfo=UTC)     # a tick just after its slot


@pytest.fixture
def leap_day():
    schedule = Schedule(nightly, "leap-day", cron="0 6 29 2 *", timezone="UTC",
                        input=lambda slot: {"slot": slot.isoformat()})
    yield schedule
    schedules.registry.remove(schedule)


def leap_day_runs() -> list[str]:
    return list(Run.objects.values_list("business_key", flat=True))


def test_its_next_slot_runs_when_it_comes(leap_day):
    assert fire_schedule(leap_day, now=FIRST_SEEN).started == []
    assert fire_schedule(leap_day, now=LEAP_DAY - timedelta(days=30)).started == []
    assert len(fire_schedule(leap_day, now=LEAP_DAY).started) == 1
    assert fire_schedule(leap_day, now=LEAP_DAY + timedelta(minutes=1)).started == []
    assert leap_day_runs() == ["schedule:leap-day:2028-02-29T06:00:00Z"]


def test_its_next_slot_runs_after_a_pause_and_a_resume(leap_day):
    fire_schedule(leap_day, now=FIRST_SEEN)
    for paused in (True, False):
        schedules.set_paused(workflow="test-scheduled", name="leap-day", paused=paused,
                             actor=Actor.system("test"), reason="maintenance",
                             now=FIRST_SEEN + timedelta(hours=1))
    assert len(fire_schedule(leap_day, now=LEAP_DAY).started) == 1
    assert leap_day_runs() == ["schedule:leap-day:2028-02-29T06:00:00Z"]


def test_a_row_left_without_a_last_slot_is_given_one_and_its_next_slot_runs(leap_day):
    fire_schedule(leap_day, now=FIRST_SEEN)
    ScheduleState.objects.filter(name="leap-day").update(last_slot_at=None)
    assert fire_schedule(leap_day, now=FIRST_SEEN + timedelta(days=1)).started == []
    assert len(fire_schedule(leap_day, now=LEAP_DAY).started) == 1
    assert leap_day_runs() == ["schedule:leap-day:2028-02-29T06:00:00Z"]
