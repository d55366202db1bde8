"""A daily cron's slot at a time the clock skips ("30 2 * * *" the night summer time begins)
runs at the first minute after the gap (03:00). When beat was down at that time, the tick
that comes back treats that slot as any missed slot: catch_up="latest" starts it however
late, "skip" counts it as skipped and says so, "all" starts it. The look for the last slot
older than the grace went on from the second before it by the wall clock, 02:59:59, a time
that does not exist, read as an hour later: the slot was passed over, started by neither
policy and counted by neither."""

import logging
from datetime import UTC, datetime

import pytest

from runs.models import Run, ScheduleState
from runs.waiting.schedules import Schedule, fire_schedule
from tests.workflows import nightly

pytestmark = pytest.mark.django_db

NIGHTS = [
    # zone, the evening before (the last tick before beat went down), the tick when it came
    # back (20 minutes after the moved slot), the moved slot in UTC and as its input says
    ("Europe/Berlin", datetime(2026, 3, 28, 20, tzinfo=UTC),
     datetime(2026, 3, 29, 1, 20, tzinfo=UTC), "2026-03-29T01:00:00Z",
     "2026-03-29T03:00:00+02:00"),
    ("America/New_York", datetime(2026, 3, 8, 4, tzinfo=UTC),
     datetime(2026, 3, 8, 7, 20, tzinfo=UTC), "2026-03-08T07:00:00Z",
     "2026-03-08T03:00:00-04:00"),
]


def daily_at_half_past_two(zone: str, catch_up: str) -> Schedule:
    return Schedule(nightly, "nightly", cron="30 2 * * *", timezone=zone, catch_up=catch_up,
                    register=False, input=lambda slot: {"slot": slot.isoformat()})


@pytest.mark.parametrize("zone, evening, back, key_slot, local_slot", NIGHTS)
@pytest.mark.parametrize("catch_up", ["latest", "all"])
def test_the_moved_slot_is_started_once_by_a_policy_that_runs_missed_slots(
        zone, evening, back, key_slot, local_slot, catch_up):
    schedule = daily_at_half_past_two(zone, catch_up)
    assert fire_schedule(schedule, now=evening).started == []

    report = fire_schedule(schedule, now=back)

    assert (len(report.started), report.skipped) == (1, 0)
    assert list(Run.objects.values_list("business_key", "input")) == [
        (f"schedule:nightly:{key_slot}", {"slot": local_slot})]
    assert ScheduleState.objects.get(name="nightly").last_slot_at.isoformat() == \
        key_slot.replace("Z", "+00:00")
    assert fire_schedule(schedule, now=back).started == [] and Run.objects.count() == 1


@pytest.mark.parametrize("zone, evening, back, key_slot, local_slot", NIGHTS)
def test_the_moved_slot_is_counted_as_skipped_and_said_under_skip(
        zone, evening, back, key_slot, local_slot, caplog):
    schedule = daily_at_half_past_two(zone, "skip")
    fire_schedule(schedule, now=evening)

    with caplog.at_level(logging.WARNING, logger="runs.waiting.schedules"):
        report = fire_schedule(schedule, now=back)

    assert (report.started, report.skipped) == ([], 1)
    assert Run.objects.count() == 0
    assert "1 missed slot(s)" in caplog.text
    assert ScheduleState.objects.get(name="nightly").last_slot_at.isoformat() == \
        key_slot.replace("Z", "+00:00")
