"""A tick of a schedule that skips, or runs the latest of, its missed slots looks back from
now by its grace and an interval. A grace or an interval reaching past the year 1
(grace=timedelta.max, written for "never too late") was accepted when declared: every tick
then failed with "OverflowError: date value out of range" and no slot ever ran. Now such a
schedule is refused as it is declared, naming it and what reaches too far, and pointing to
catch_up="all", under which the grace is not looked back by and such a schedule still
fires."""

from datetime import UTC, datetime, timedelta

import pytest

from runs.waiting import schedules
from tests.workflows import nightly

T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


def declare(**options):
    return schedules.Schedule(nightly, "far", register=False,
                              input=lambda slot: {"slot": slot.isoformat()}, **options)


@pytest.mark.parametrize("options, reach", [
    (dict(every=timedelta(minutes=1), grace=timedelta.max),
     f"grace {timedelta.max} and every 0:01:00"),
    (dict(cron="* * * * *", grace=timedelta.max, catch_up="latest"), f"grace {timedelta.max}"),
    (dict(every=timedelta(days=3_000_000)), "grace 0:05:00 and every 3000000 days, 0:00:00"),
])
def test_a_look_back_past_the_year_one_is_refused_naming_the_schedule(options, reach):
    with pytest.raises(schedules.ScheduleError) as refused:
        declare(**options)
    assert str(refused.value) == (
        f"schedule 'far': {reach} reach back from now past the year 1, which no date holds "
        "(to run every missed slot, declare catch_up='all')")


@pytest.mark.django_db
def test_under_catch_up_all_such_a_grace_is_declared_and_fires():
    every_slot = declare(every=timedelta(minutes=1), grace=timedelta.max, catch_up="all")
    assert schedules.fire_schedule(every_slot, now=T0).started == []
    report = schedules.fire_schedule(every_slot, now=T0 + timedelta(minutes=2))
    assert report.failed == [] and len(report.started) == 2
