"""Finding the slot before now (a schedule's first sight, its resume, a catch-up that skips)
looks back from now, not forward through a year of slots: a cron firing every second is
handled in a tick without holding the scheduler for minutes, and finds the same slot a
cron firing once a year does, across a daylight-saving overlap too."""

from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run, ScheduleState
from runs.waiting.schedules import Schedule, fire_schedule
from tests.workflows import nightly

NOW = datetime(2026, 3, 2, 9, 0, 30, 250000, tzinfo=UTC)


def cron(expression, zone="UTC"):
    return Schedule(nightly, "probe", cron=expression, timezone=zone, register=False,
                    input=lambda slot: {"slot": slot.isoformat()})


@pytest.mark.django_db
def test_the_first_tick_of_a_cron_firing_every_second_starts_with_its_next_slot_at_once(
        monkeypatch):
    every_second = cron("* * * * * *")
    slots_after = Schedule.slots_after

    def counted(schedule, after):
        for looked_at, slot in enumerate(slots_after(schedule, after), 1):
            # The slots of the last hour at most, not the 31 million of a year (minutes of
            # counting under the scheduler's lock, every other schedule waiting).
            assert looked_at <= 3602, "counting forward through a year of slots"
            yield slot

    monkeypatch.setattr(Schedule, "slots_after", counted)
    assert fire_schedule(every_second, now=NOW).started == []
    assert ScheduleState.objects.get(name="probe").last_slot_at == NOW.replace(microsecond=0)
    report = fire_schedule(every_second, now=NOW + timedelta(seconds=2))
    assert len(report.started) == 2 and Run.objects.count() == 2


@pytest.mark.parametrize("expression, zone, at, latest", [
    ("0 6 * * *", "UTC", NOW, datetime(2026, 3, 2, 6, tzinfo=UTC)),
    ("0 6 1 1 *", "UTC", NOW, datetime(2026, 1, 1, 6, tzinfo=UTC)),
    ("0 0 29 2 *", "UTC", NOW, None),                 # 2024-02-29: more than a year back
    # 02:03 on the second pass (UTC+1) of 25 October in Berlin: 02:30 UTC+2 has passed.
    ("30 2 * * *", "Europe/Berlin", datetime(2026, 10, 25, 1, 3, tzinfo=UTC),
     datetime(2026, 10, 25, 0, 30, tzinfo=UTC)),
    ("*/30 * * * *", "Europe/Berlin", datetime(2026, 10, 25, 1, 10, tzinfo=UTC),
     datetime(2026, 10, 25, 1, 0, tzinfo=UTC)),
])
def test_the_slot_before_a_time_is_the_last_one_at_or_before_it(expression, zone, at, latest):
    found = cron(expression, zone).latest_slot(at)
    # In UTC: a time in a repeated hour never equals one in another zone (PEP 495).
    assert (found and found.astimezone(UTC)) == latest
