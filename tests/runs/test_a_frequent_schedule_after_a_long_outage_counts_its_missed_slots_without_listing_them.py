"""A schedule firing every few seconds, after beat was down for a month (or a clock that
jumped a month on), skips or catches up only its last slots as its policy says: the tick
counts the missed slots exactly, but does not list a month of them one by one under the
scheduler's lock (260,000 slots for a 10 s schedule, seconds on every tick it fails)."""

from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run, ScheduleState
from runs.waiting.schedules import Schedule, fire_schedule
from tests.workflows import nightly

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 9, 0, 0, tzinfo=UTC)
OUTAGE = timedelta(days=30)
EVERY = timedelta(seconds=10)


class CountedSchedule(Schedule):
    """A schedule that counts the slots a tick looks at."""

    looked_at = 0

    def slots_after(self, start):
        for slot in super().slots_after(start):
            self.looked_at += 1
            yield slot


@pytest.mark.parametrize("catch_up, started", [("skip", 30), ("latest", 1)])
def test_a_month_of_missed_slots_is_counted_and_only_the_last_ones_looked_at(catch_up,
                                                                              started):
    frequent = CountedSchedule(nightly, "frequent", every=EVERY, catch_up=catch_up,
                               grace=timedelta(minutes=5), register=False,
                               input=lambda slot: {"slot": slot.isoformat()})
    assert fire_schedule(frequent, now=T0).started == []   # first sight: from its next slot
    back = T0 + OUTAGE + timedelta(seconds=5)

    report = fire_schedule(frequent, now=back)

    every_slot = OUTAGE // EVERY                           # 259,200 slots came and went
    assert len(report.started) == started == Run.objects.count()
    assert report.skipped == every_slot - started
    assert frequent.looked_at < 100
    state = ScheduleState.objects.get(name="frequent")
    assert state.last_slot_at == T0 + OUTAGE
    # The last slot is the one started; none is started twice by the next tick.
    assert Run.objects.filter(
        business_key="schedule:frequent:2026-04-01T09:00:00Z").count() == 1
    again = fire_schedule(frequent, now=back)
    assert again.started == [] and again.skipped == 0 and Run.objects.count() == started
