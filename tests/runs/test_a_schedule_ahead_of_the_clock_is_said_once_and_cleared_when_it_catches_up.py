"""A schedule whose last slot handled lies ahead of the database's clock (the clock was set
back, the row edited) starts nothing until the clock gets there. It is said once, as a
failing schedule is: its row shows how far ahead, one control record, one WARNING line, not
one a tick. The first tick that finds the clock caught up clears it with one recovery
record, before any run starts; the schedule then fires as before."""

import logging
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from runs import store
from runs.models import ControlRecord, Run, ScheduleState
from runs.waiting.schedules import fire_due_schedules, set_paused
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db


@pytest.fixture
def start():
    """Ten minutes ago, half past a minute: the replayed ticks fall between slots."""
    return timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=10)


def runs_of(name):
    return Run.objects.filter(business_key__startswith=f"schedule:{name}:").count()


def records_of(name):
    return list(ControlRecord.objects.filter(target=name).order_by("id")
                .values_list("action", "reason"))


def ahead_seconds(text):
    return int(re.search(r"is ahead of the clock by (\d+) s", text).group(1))


def ahead_lines(caplog, name):
    return [r for r in caplog.records
            if f"schedule {name} of" in r.getMessage() and "ahead of the clock" in r.getMessage()]


def test_a_last_slot_ahead_of_the_clock_is_said_once_and_cleared_when_the_clock_catches_up(
        declared_schedule, start, caplog):
    caplog.set_level(logging.INFO)
    declared_schedule("set-back")
    fire_due_schedules(now=start)                                  # first sight
    # Ahead of the database's clock, as after the clock was set back (a replayed tick's
    # time is not a clock: the slots handled since it are ahead of it, and that is no
    # trouble: tests/console/test_schedules_tick.py).
    clock = store.current().now()
    ScheduleState.objects.filter(name="set-back").update(last_slot_at=clock + timedelta(minutes=5))

    for _ in (1, 2, 3):
        assert fire_due_schedules().failed == []
    state = ScheduleState.objects.get(name="set-back")
    assert state.ahead_of_clock and clock <= state.failing_since <= store.current().now()
    assert state.failures == 3
    assert [action for action, _ in records_of("set-back")] == ["schedule_failing"]
    assert 0 < ahead_seconds(records_of("set-back")[0][1]) <= 300
    assert ahead_lines(caplog, "set-back")[0].levelno == logging.WARNING
    # How far ahead at the last tick: the row is kept up to date, nothing more is said.
    ScheduleState.objects.filter(name="set-back").update(last_slot_at=clock + timedelta(hours=1))
    fire_due_schedules()
    state = ScheduleState.objects.get(name="set-back")
    assert state.failures == 4 and 300 < ahead_seconds(state.last_error) <= 3600
    assert len(records_of("set-back")) == 1
    assert len(ahead_lines(caplog, "set-back")) == 1
    assert runs_of("set-back") == 0

    # The clock catching up with the slot, played by moving the slot back behind it (a test
    # cannot move the database's clock on). A replayed tick judges it by that clock as well:
    # caught up, though no slot is due at its own time, and none was needed to clear it.
    ScheduleState.objects.filter(name="set-back").update(
        last_slot_at=start + timedelta(minutes=5, seconds=30))
    fire_due_schedules(now=start + timedelta(minutes=5))
    assert runs_of("set-back") == 0
    state = ScheduleState.objects.get(name="set-back")
    assert (state.ahead_of_clock, state.failing_since, state.failures, state.last_error) == (
        False, None, 0, "")
    assert [action for action, _ in records_of("set-back")] == [
        "schedule_failing", "schedule_recovered"]
    assert "the clock caught up with its last slot handled" in records_of("set-back")[1][1]
    assert len(ahead_lines(caplog, "set-back")) == 1

    # The next slot after the one recorded starts its run, and nothing more is said.
    fire_due_schedules(now=start + timedelta(minutes=7))
    assert runs_of("set-back") == 1
    assert len(records_of("set-back")) == 2


def test_a_schedule_ahead_of_the_clock_that_is_resumed_goes_on_from_now(
        declared_schedule, start):
    declared_schedule("resumed")
    fire_due_schedules(now=start)
    ScheduleState.objects.filter(name="resumed").update(
        last_slot_at=timezone.now() + timedelta(days=1))
    fire_due_schedules(now=start + timedelta(minutes=1))
    assert ScheduleState.objects.get(name="resumed").ahead_of_clock
    set_paused(workflow="test-scheduled", name="resumed", paused=True, actor=SYSTEM,
               reason="clock set back")
    set_paused(workflow="test-scheduled", name="resumed", paused=False, actor=SYSTEM,
               reason="go on from now", now=start + timedelta(minutes=2))
    state = ScheduleState.objects.get(name="resumed")
    assert (state.ahead_of_clock, state.failing_since, state.last_error) == (False, None, "")
    fire_due_schedules(now=start + timedelta(minutes=3))
    assert runs_of("resumed") == 1
    assert [action for action, _ in records_of("resumed")] == [
        "schedule_failing", "schedule_paused", "schedule_resumed"]
