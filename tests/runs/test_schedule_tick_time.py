"""A scheduler tick never runs ahead of the clock, and one schedule that cannot be worked
out does not stop the others from firing."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from runs.models import Run, ScheduleState
from runs.waiting.schedules import ScheduleError, fire_due_schedules

pytestmark = pytest.mark.django_db

END_OF_CALENDAR = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)




def runs_of(name):
    return Run.objects.filter(business_key__startswith=f"schedule:{name}:").count()


@pytest.mark.parametrize("ahead", [timedelta(days=3 * 365), END_OF_CALENDAR])
def test_a_tick_ahead_of_the_database_clock_is_refused_and_records_nothing(ahead):
    at = ahead if isinstance(ahead, datetime) else timezone.now() + ahead
    with pytest.raises(ScheduleError, match="ahead of the database clock"):
        fire_due_schedules(now=at)
    assert not ScheduleState.objects.exists() and not Run.objects.exists()


def test_one_schedule_that_cannot_be_worked_out_does_not_stop_the_others(declared_schedule, caplog):
    def no_input(slot):
        raise RuntimeError("input service gone")

    declared_schedule("a-broken", input=no_input)
    declared_schedule("b-far-ahead")
    declared_schedule("c-healthy", catch_up="all")
    now = timezone.now()
    fire_due_schedules(now=now - timedelta(minutes=2))     # first sight of each
    # A slot recorded at the end of the calendar (left by an unchecked tick before).
    ScheduleState.objects.filter(name="b-far-ahead").update(last_slot_at=END_OF_CALENDAR)
    report = fire_due_schedules(now=now)
    assert report.failed == ["test-scheduled/a-broken"]
    assert "input service gone" in caplog.text and "ahead of the clock" in caplog.text
    assert runs_of("c-healthy") == 2
    assert runs_of("a-broken") == runs_of("b-far-ahead") == 0
