"""A schedule whose ticks fail (its input raises, its slots run past the calendar, every slot
is refused) is recorded on its row, written once as a control record and logged once at
ERROR; the ticks after it only count. The first tick that starts a run again clears it and
writes one recovery record. Other schedules fire regardless."""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import ControlRecord, Run, ScheduleState
from runs.waiting.schedule_health import ERROR_TEXT_MAX
from runs.waiting.schedules import fire_due_schedules

pytestmark = pytest.mark.django_db




@pytest.fixture
def ticks():
    """Tick times a minute apart, replayed from ten minutes ago (the first is first sight)."""
    start = timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=10)
    return [start + timedelta(minutes=n) for n in range(6)]


def runs_of(name):
    return Run.objects.filter(business_key__startswith=f"schedule:{name}:").count()


def records_of(name):
    return list(ControlRecord.objects.filter(target=name).order_by("id")
                .values_list("action", "actor_label", "actor_user_id"))


def raising(message):
    def input_for(slot):
        raise RuntimeError(message)
    return input_for


def messages(caplog, name, level):
    return [r.getMessage() for r in caplog.records
            if r.levelno == level and f"schedule {name} of" in r.getMessage()]


def test_an_input_that_raises_at_three_ticks_is_recorded_once_and_counted(
        declared_schedule, ticks, caplog):
    caplog.set_level(logging.INFO)
    flaky = declared_schedule("flaky", input=raising("input service gone, token=abc123secret"))
    declared_schedule("healthy")
    fire_due_schedules(now=ticks[0])
    for at in ticks[1:4]:
        assert fire_due_schedules(now=at).failed == ["test-scheduled/flaky"]
    state = ScheduleState.objects.get(name="flaky")
    assert state.failing_since == ticks[1] and state.failures == 3
    assert state.last_error == "RuntimeError: input service gone, token=[redacted]"
    assert records_of("flaky") == [("schedule_failing", "scheduler", None)]
    assert ControlRecord.objects.get(action="schedule_failing").reason == state.last_error
    assert len(messages(caplog, "flaky", logging.ERROR)) == 1
    assert len(messages(caplog, "flaky", logging.WARNING)) == 2
    # The traceback is masked by the log's formatter (observability.logs); the message here.
    assert not any("abc123secret" in r.getMessage() for r in caplog.records)
    # The healthy schedule in the same ticks started its run at each.
    assert runs_of("healthy") == 3 and runs_of("flaky") == 0
    assert ScheduleState.objects.get(name="healthy").failing_since is None

    flaky.input = lambda slot: {"slot": slot.isoformat()}
    report = fire_due_schedules(now=ticks[4])
    assert report.failed == [] and runs_of("flaky") == 4  # the slots it failed on, too
    state = ScheduleState.objects.get(name="flaky")
    assert (state.failing_since, state.failures, state.last_error) == (None, 0, "")
    assert [action for action, _, _ in records_of("flaky")] == [
        "schedule_failing", "schedule_recovered"]
    assert "3 failed tick(s)" in ControlRecord.objects.get(action="schedule_recovered").reason
    # Healthy ticks after the recovery write nothing more.
    fire_due_schedules(now=ticks[5])
    assert len(records_of("flaky")) == 2
    assert not records_of("healthy")


def test_a_schedule_whose_every_slot_is_refused_is_failing_until_a_slot_starts(
        declared_schedule, ticks, caplog):
    caplog.set_level(logging.INFO)
    refused = declared_schedule("refused", input=lambda slot: {"wrong": 1})
    fire_due_schedules(now=ticks[0])
    for at in ticks[1:4]:
        assert len(fire_due_schedules(now=at).refused) == 1
    state = ScheduleState.objects.get(name="refused")
    assert state.failing_since == ticks[1] and state.failures == 3
    assert "does not match its schema" in state.last_error
    assert records_of("refused") == [("schedule_failing", "scheduler", None)]
    assert len(messages(caplog, "refused", logging.ERROR)) == 1
    # A tick with no slot due says nothing either way: the schedule is still failing.
    fire_due_schedules(now=ticks[3] + timedelta(seconds=10))
    assert ScheduleState.objects.get(name="refused").failures == 3
    refused.input = lambda slot: {"slot": slot.isoformat()}
    fire_due_schedules(now=ticks[4])
    assert runs_of("refused") == 1
    assert ScheduleState.objects.get(name="refused").failing_since is None
    assert [action for action, _, _ in records_of("refused")] == [
        "schedule_failing", "schedule_recovered"]


def test_a_schedule_whose_slots_run_past_the_calendar_is_failing_not_raising(
        declared_schedule, ticks):
    # Its first slot after 2000 is past 9999. (Under the other catch-up policies a tick's
    # look back past the year 1 is refused when declared: only "all" reaches the tick.)
    declared_schedule("far", every=timedelta(days=3_000_000), catch_up="all")
    declared_schedule("healthy")
    assert fire_due_schedules(now=ticks[0]).failed == ["test-scheduled/far"]
    report = fire_due_schedules(now=ticks[1])
    assert report.failed == ["test-scheduled/far"] and runs_of("healthy") == 1
    state = ScheduleState.objects.get(name="far")
    assert state.failing_since == ticks[0] and state.failures == 2
    assert state.last_error == "OverflowError: date value out of range"
    assert [action for action, _, _ in records_of("far")] == ["schedule_failing"]


def test_an_error_text_is_kept_on_one_line_short_and_storable(declared_schedule, ticks):
    declared_schedule("noisy",
                      input=raising("bad\x00byte\nforged line\x1b[31mred\u202e" + "x" * 5000))
    fire_due_schedules(now=ticks[0])
    fire_due_schedules(now=ticks[1])
    error = ScheduleState.objects.get(name="noisy").last_error
    assert error.startswith("RuntimeError: bad\\x00byte\\u000aforged line\\u001b[31mred\\u202e")
    assert len(error) == ERROR_TEXT_MAX and error.endswith("...")
    assert ControlRecord.objects.get(action="schedule_failing").reason == error
