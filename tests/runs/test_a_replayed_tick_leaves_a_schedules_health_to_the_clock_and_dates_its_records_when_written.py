"""A tick replayed at a past time (`schedules tick --now`, drills, tests) handles the slots
of that time, but a schedule is ahead of the clock only when it is ahead of the database's
clock: the slots handled since the replayed time are not. So a replay leaves a failing
schedule's history as it is (no recovery the next tick would write, no failure "since" then),
and the control records it writes are dated by the database's clock, when they are written,
in order with the records before them."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs import store
from runs.models import ControlRecord, Run, ScheduleState
from runs.waiting.schedules import fire_due_schedules

pytestmark = pytest.mark.django_db


@pytest.fixture
def start():
    """Ten minutes ago, half past a minute: the replayed ticks fall between slots."""
    return timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=10)


def raising(slot):
    raise RuntimeError("input service gone")


def records_of(name):
    return list(ControlRecord.objects.filter(target=name).order_by("id")
                .values_list("action", "created_at"))


def test_a_replay_before_a_failing_schedules_last_slot_keeps_its_failure_as_it_was(
        declared_schedule, start):
    declared_schedule("flaky", input=raising)
    fire_due_schedules(now=start)                                  # first sight
    fire_due_schedules(now=start + timedelta(minutes=1))           # fails
    fire_due_schedules(now=start - timedelta(hours=2))             # replayed before its slot
    state = ScheduleState.objects.get(name="flaky")
    assert not state.ahead_of_clock and state.failures == 1
    assert "ahead of the clock" not in state.last_error

    fire_due_schedules(now=start + timedelta(minutes=2))           # fails again
    state = ScheduleState.objects.get(name="flaky")
    assert (state.failing_since, state.failures, state.last_error) == (
        start + timedelta(minutes=1), 2, "RuntimeError: input service gone")
    assert [action for action, _ in records_of("flaky")] == ["schedule_failing"]


def test_the_records_of_a_replayed_tick_are_dated_when_written_and_its_slots_as_replayed(
        declared_schedule, start):
    flaky = declared_schedule("flaky", input=raising)
    fire_due_schedules(now=start)
    before = store.current().now()
    fire_due_schedules(now=start + timedelta(minutes=1))           # fails
    flaky.input = lambda slot: {"slot": slot.isoformat()}
    fire_due_schedules(now=start + timedelta(minutes=2))           # recovers
    after = store.current().now()

    records = records_of("flaky")
    assert [action for action, _ in records] == ["schedule_failing", "schedule_recovered"]
    assert all(before <= created_at <= after for _, created_at in records)
    assert records[0][1] <= records[1][1]
    # The slots it handled are the replayed time's.
    slots = [start + timedelta(seconds=30), start + timedelta(seconds=90)]
    assert sorted(Run.objects.filter(business_key__startswith="schedule:flaky:")
                  .values_list("business_key", flat=True)) == [
        flaky.business_key(slot) for slot in slots]
    assert ScheduleState.objects.get(name="flaky").last_slot_at == slots[-1]
