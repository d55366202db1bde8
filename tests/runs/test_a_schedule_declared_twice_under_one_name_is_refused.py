"""Two schedules of one workflow declared under one name (a copy left by an edit: "daily"
at 06:00, then "daily" at 18:00) were both accepted: the second replaced the first in the
schedules without a word, and the first's slots never ran. Now the second is refused as it
is declared, naming the schedule and its workflow, and the first stays and fires."""

from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run
from runs.waiting import schedules
from tests.workflows import nightly

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


def test_the_second_is_refused_and_the_first_keeps_its_slots():
    first = schedules.Schedule(nightly, "twice", every=timedelta(hours=1),
                               input=lambda slot: {"slot": f"first {slot.isoformat()}"})
    try:
        with pytest.raises(schedules.ScheduleError) as refused:
            schedules.Schedule(nightly, "twice", cron="0 18 * * *",
                               input=lambda slot: {"slot": f"second {slot.isoformat()}"})
        assert str(refused.value) == ("schedule 'twice' of test-scheduled: declared twice "
                                      "(schedule names are unique within a workflow)")
        assert schedules.registry.get("test-scheduled", "twice") is first
        # First sight starts with the next slot; an hour on, that slot's run is started.
        assert schedules.fire_schedule(first, now=T0).started == []
        report = schedules.fire_schedule(first, now=T0 + timedelta(hours=1))
        assert len(report.started) == 1
        assert Run.objects.get().input["slot"].startswith("first ")
    finally:
        schedules.registry.remove(first)


def test_one_schedule_added_again_is_no_second_declaration():
    schedule = schedules.Schedule(nightly, "once", every=timedelta(hours=1), register=False,
                                  input=lambda slot: {"slot": slot.isoformat()})
    try:
        schedules.registry.add(schedule)
        schedules.registry.add(schedule)
        assert schedules.registry.get("test-scheduled", "once") is schedule
    finally:
        schedules.registry.remove(schedule)
