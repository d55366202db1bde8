"""After beat was down for a day, the catch-up policy decides how many runs start (skip:
none of the missed slots, latest: one); the slots it leaves out are said once in the log,
with how many and since when, so a day of slots never goes without a trace."""

import logging
from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run
from runs.waiting.schedules import Schedule, fire_schedule
from tests.workflows import nightly

T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


def hourly(catch_up):
    return Schedule(nightly, "hourly", cron="0 * * * *", catch_up=catch_up, register=False,
                    input=lambda slot: {"slot": slot.isoformat()})


@pytest.mark.django_db
@pytest.mark.parametrize("catch_up, runs, skipped", [("skip", 0, 24), ("latest", 1, 23)])
def test_a_day_down_starts_what_the_policy_says_and_logs_the_slots_it_skips(
        catch_up, runs, skipped, caplog):
    schedule = hourly(catch_up)
    fire_schedule(schedule, now=T0)                       # first sight: 09:00 handled
    with caplog.at_level(logging.WARNING, logger="runs.waiting.schedules"):
        report = fire_schedule(schedule, now=T0 + timedelta(days=1, minutes=10))
    assert report.skipped == skipped and len(report.started) == runs == Run.objects.count()
    said = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert said == [f"schedule hourly of test-scheduled: {skipped} missed slot(s) after "
                    f"2026-03-02T09:00:00+00:00 skipped (catch_up={catch_up})"]
    # The next tick, with nothing missed, says nothing more.
    caplog.clear()
    fire_schedule(schedule, now=T0 + timedelta(days=1, minutes=11))
    assert not [r for r in caplog.records if "skipped" in r.getMessage()]
