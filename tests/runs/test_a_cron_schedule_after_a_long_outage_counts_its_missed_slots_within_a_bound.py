"""A cron schedule after beat was down for days (or a clock that jumped on) skips or catches
up only its last slots as its policy says, as an interval schedule does. A cron's slots
cannot be counted by arithmetic: the missed ones are counted one by one without being kept,
exactly up to MAX_COUNTED_MISSED and "or more" past it, so a month's outage of a schedule
firing every second (2.6 million slots) is not listed under the scheduler's lock."""

import logging
from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run, ScheduleState
from runs.waiting.schedules import MAX_COUNTED_MISSED, fire_schedule
from tests.runs.test_a_frequent_schedule_after_a_long_outage_counts_its_missed_slots_without_listing_them import (  # noqa: E501
    CountedSchedule,
)
from tests.workflows import nightly

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)


def cron_schedule(expression, catch_up):
    return CountedSchedule(nightly, "frequent", cron=expression, catch_up=catch_up,
                           grace=timedelta(minutes=5), register=False,
                           input=lambda slot: {"slot": slot.isoformat()})


@pytest.mark.parametrize("catch_up, started", [("skip", 5), ("latest", 1)])
def test_five_days_of_a_minute_cron_are_counted_exactly_and_only_the_last_ones_started(
        catch_up, started):
    schedule = cron_schedule("* * * * *", catch_up)
    assert fire_schedule(schedule, now=T0).started == []   # first sight: from its next slot
    back = T0 + timedelta(days=5, seconds=5)

    report = fire_schedule(schedule, now=back)

    every_slot = 5 * 24 * 60                               # 7,200 slots came and went
    assert len(report.started) == started == Run.objects.count()
    assert report.skipped == every_slot - started
    assert ScheduleState.objects.get(name="frequent").last_slot_at == T0 + timedelta(days=5)
    assert Run.objects.filter(
        business_key="schedule:frequent:2026-03-07T09:00:00Z").count() == 1
    again = fire_schedule(schedule, now=back)
    assert again.started == [] and again.skipped == 0 and Run.objects.count() == started


def test_a_month_of_a_cron_firing_every_second_is_counted_up_to_the_bound(caplog):
    schedule = cron_schedule("* * * * * *", "latest")
    fire_schedule(schedule, now=T0)
    schedule.looked_at = 0
    back = T0 + timedelta(days=30)

    with caplog.at_level(logging.WARNING, logger="runs.waiting.schedules"):
        report = fire_schedule(schedule, now=back)

    assert len(report.started) == 1 == Run.objects.count()
    assert report.skipped >= MAX_COUNTED_MISSED
    # The count's bound, the look back for the last slot older than the grace (an hour at
    # most) and the grace's own slots: not the month's 2.6 million.
    assert schedule.looked_at < MAX_COUNTED_MISSED + 3600 + 400
    assert f"{report.skipped} or more missed slot(s)" in caplog.text
    assert ScheduleState.objects.get(name="frequent").last_slot_at == back
