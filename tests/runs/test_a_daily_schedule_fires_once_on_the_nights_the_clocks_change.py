"""A cron schedule keeps its time zone's wall clock across daylight-saving changes, one run
a day whatever the night: "30 2 * * *" in Europe/Berlin, ticked every two minutes through
the night summer time begins (29 March 2026: 02:00 jumps to 03:00, 02:30 never happens) and
the night it ends (25 October 2026: 02:30 happens twice), starts one run on each day, at the
first minute that exists after the gap (03:00) and at the first of the two 02:30s, with a
seconds field too (six fields, which cronsim leaves to the clock). A cron whose minute or hour
is a wildcard runs in both hours of the night summer time ends (cron's rule). An
interval is a duration: its slots stay 24 hours apart across the change."""

from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run
from runs.waiting.schedules import Schedule, fire_schedule
from tests.workflows import nightly

pytestmark = pytest.mark.django_db
SPRING = datetime(2026, 3, 28, 20, tzinfo=UTC)   # 21:00 in Berlin, the evening before
AUTUMN = datetime(2026, 10, 24, 20, tzinfo=UTC)  # 22:00 in Berlin, the evening before


def tick_through_the_night(schedule: Schedule, evening: datetime) -> list[tuple[str, str]]:
    """Tick every two minutes for ten hours; the runs' keys and slots (local), by key."""
    for minutes in range(0, 10 * 60 + 1, 2):
        report = fire_schedule(schedule, now=evening + timedelta(minutes=minutes))
        assert (report.refused, report.failed) == ([], [])
    return sorted((key, data["slot"]) for key, data in
                  Run.objects.filter(workflow_name="test-scheduled")
                  .values_list("business_key", "input"))


def berlin(cron: str) -> Schedule:
    return Schedule(nightly, "berlin", cron=cron, timezone="Europe/Berlin", register=False,
                    input=lambda slot: {"slot": slot.isoformat()})


def test_the_night_summer_time_begins_runs_the_missing_slot_once_at_three():
    assert tick_through_the_night(berlin("30 2 * * *"), SPRING) == [
        ("schedule:berlin:2026-03-29T01:00:00Z", "2026-03-29T03:00:00+02:00")]


def test_the_night_summer_time_ends_runs_the_doubled_slot_once_at_the_first():
    assert tick_through_the_night(berlin("30 2 * * *"), AUTUMN) == [
        ("schedule:berlin:2026-10-25T00:30:00Z", "2026-10-25T02:30:00+02:00")]


def test_an_hourly_cron_runs_in_both_of_the_hours_the_night_summer_time_ends():
    runs = tick_through_the_night(berlin("30 * * * *"), AUTUMN)
    assert [slot for _, slot in runs if slot.startswith("2026-10-25T02")] == [
        "2026-10-25T02:30:00+02:00", "2026-10-25T02:30:00+01:00"]
    assert len(runs) == 10  # 20:30Z to 05:30Z, one an hour, each once


def test_an_interval_is_a_duration_its_slots_24_hours_apart_across_the_change():
    daily = Schedule(nightly, "every-day", every=timedelta(days=1), timezone="Europe/Berlin",
                     register=False, input=lambda slot: {"slot": slot.isoformat()})
    slots = daily.next_slots(SPRING, 2)
    assert [s.isoformat() for s in slots] == ["2026-03-29T01:00:00+01:00",
                                              "2026-03-30T02:00:00+02:00"]
    # In UTC: datetimes of one zone subtract by the wall clock (25 hours here).
    assert slots[1].astimezone(UTC) - slots[0].astimezone(UTC) == timedelta(hours=24)



@pytest.mark.parametrize("cron", ["0 30 2 * * *", "15 30 2 * * *"])
@pytest.mark.parametrize("evening, slot", [
    (SPRING, "2026-03-29T01:00:{s}Z 2026-03-29T03:00:{s}+02:00"),
    (AUTUMN, "2026-10-25T00:30:{s}Z 2026-10-25T02:30:{s}+02:00")])
def test_a_cron_with_seconds_keeps_the_same_rule_on_both_nights(cron, evening, slot):
    """cronsim leaves six fields to the clock: "0 30 2 * * *" ran never the night summer
    time begins and twice the night it ends."""
    key, local = slot.format(s=cron.split()[0].zfill(2)).split()
    assert tick_through_the_night(berlin(cron), evening) == [(f"schedule:berlin:{key}", local)]


@pytest.mark.parametrize("cron", ["*/30 2 * * *", "0 */30 2 * * *"])
@pytest.mark.parametrize("evening, slots", [
    (SPRING, []),
    (AUTUMN, ["2026-10-25T02:00:00+02:00", "2026-10-25T02:30:00+02:00",
              "2026-10-25T02:00:00+01:00", "2026-10-25T02:30:00+01:00"])])
def test_a_cron_whose_minute_is_a_wildcard_runs_by_the_clock_as_cron_runs_it(cron, evening,
                                                                              slots):
    """ "*/30 2 * * *" runs at the half hours of both 2 o'clocks the night summer time ends,
    and at none the night it begins (cron's rule for a wildcard minute or hour), in five
    fields or six."""
    assert sorted(slot for _, slot in tick_through_the_night(berlin(cron), evening)) == \
        sorted(slots)
