"""A schedule declared with a value of the wrong kind is refused when it is declared, with a
ScheduleError naming the schedule and the option, not a TypeError from deep inside a tick."""

from datetime import UTC, datetime, timedelta

import pytest

from runs.waiting.schedules import Schedule, ScheduleError
from tests.workflows import nightly


@pytest.mark.parametrize("options, message", [
    ({"every": 5}, "every must be a timedelta, not 5"),
    ({"every": "1h"}, "every must be a timedelta"),
    ({"every": timedelta(milliseconds=500)}, "every must be a whole number of seconds"),
    ({"every": timedelta(seconds=90, microseconds=1)}, "every must be a whole number of seconds"),
    ({"every": timedelta(minutes=1), "timezone": None}, "unknown time zone None"),
    ({"cron": 5}, "cron expression 5 is not valid"),
    ({"every": timedelta(minutes=1), "grace": timedelta(minutes=-1)}, "grace must be"),
    ({"every": timedelta(minutes=1), "grace": None}, "grace must be"),
])
def test_a_wrong_kind_of_value_is_refused_naming_the_schedule_and_the_option(options, message):
    with pytest.raises(ScheduleError, match=f"schedule 'bad': {message}"):
        Schedule(nightly, "bad", register=False, **options)


def test_slots_of_an_interval_of_whole_seconds_each_have_a_business_key_of_their_own():
    every_second = Schedule(nightly, "fast", every=timedelta(seconds=1), register=False,
                            input=lambda slot: {"slot": slot.isoformat()})
    slots = every_second.next_slots(datetime(2026, 3, 2, 9, 0, 0, 500000, tzinfo=UTC), 5)
    keys = {every_second.business_key(slot) for slot in slots}
    assert len(keys) == 5
