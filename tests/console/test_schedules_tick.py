"""`schedules tick --now`: a replay of a scheduler tick in the past (what beat does, at an
earlier time); a time ahead of the clock or no date at all is refused and nothing is
written."""

import pytest
from django.core.management import CommandError, call_command

from runs.models import ScheduleState

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("at", ["9999-12-31T23:59:59+00:00", "2099-01-01T00:00:00+00:00"])
def test_a_tick_ahead_of_the_clock_is_refused_and_no_schedule_moves(at):
    with pytest.raises(CommandError, match="ahead of the database clock"):
        call_command("schedules", "tick", "--now", at)
    assert not ScheduleState.objects.exists()


@pytest.mark.parametrize("at", ["2026-13-45T00:00:00+00:00", "2026-02-30T12:00:00+00:00",
                                "2026-01-01T00:00:00", "0001-01-01T00:00:00+14:00"])
def test_a_tick_time_that_names_no_date_is_refused(at):
    # The last two: no offset, and a UTC value before the year 1 (audit.given_times).
    with pytest.raises(CommandError, match="not an ISO 8601 time with an offset"):
        call_command("schedules", "tick", "--now", at)
    assert not ScheduleState.objects.exists()



@pytest.mark.parametrize("at", ["0001-01-01T00:00:01+00:00", "0001-01-01T00:00:00-10:00",
                                "2000-01-01T00:00:00+00:00"])
def test_a_tick_more_than_a_year_back_is_refused_and_no_schedule_moves(at):
    with pytest.raises(CommandError, match="more than 366 days before the database clock"):
        call_command("schedules", "tick", "--now", at)
    assert not ScheduleState.objects.exists()

