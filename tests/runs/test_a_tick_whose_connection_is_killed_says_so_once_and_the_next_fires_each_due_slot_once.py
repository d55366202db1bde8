"""A scheduler tick whose database session is killed (pg_terminate_backend from another
session: an operator, a failover) in the middle of its schedules logged a traceback for
every schedule after it, each failing on the dead session, or, killed while a slot's run was
being created, recorded that schedule as failing and went on with the rest on a new session
that no longer held the scheduler's lock. Now the tick notices that the session is gone,
says so in one line, stops, and records nothing on any schedule; the next tick starts what
was left, each slot's run once, none lost."""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import ControlRecord, Run
from runs.waiting import schedules
from tests.cancelled_statement import end_this_session

pytestmark = pytest.mark.django_db(transaction=True)

NAMES = ["lost-a", "lost-b", "lost-c", "lost-d"]


@pytest.fixture
def tick_times(declared_schedule):
    """The four schedules, seen once (first sight starts nothing); then the time of the tick
    at which each has its one slot due."""
    for name in NAMES:
        declared_schedule(name)
    first = timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=2)
    schedules.fire_due_schedules(now=first)
    assert not Run.objects.filter(business_key__startswith="schedule:lost-").exists()
    return first + timedelta(minutes=1)


def slot_runs() -> dict[str, int]:
    keys = Run.objects.filter(business_key__startswith="schedule:lost-").values_list(
        "business_key", flat=True)
    return {name: sum(key.startswith(f"schedule:{name}:") for key in keys) for name in NAMES}


def problems(caplog) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def the_next_tick_starts_the_rest_once(at, fired_before: list[str], caplog) -> None:
    caplog.clear()
    report = schedules.fire_due_schedules(now=at)
    assert not report.lost and not report.failed
    assert not problems(caplog), [r.getMessage() for r in problems(caplog)]
    started = Run.objects.filter(pk__in=report.started).values_list("business_key", flat=True)
    assert sorted(key.split(":")[1] for key in started) == \
        [name for name in NAMES if name not in fired_before]
    assert slot_runs() == dict.fromkeys(NAMES, 1)
    # Nothing was said to be failing, by either tick.
    assert not ControlRecord.objects.filter(action="schedule_failing").exists()
    # And a tick after that has nothing left to start.
    assert schedules.fire_due_schedules(now=at).started == []
    assert slot_runs() == dict.fromkeys(NAMES, 1)


def test_a_session_killed_between_two_schedules_is_said_once(tick_times, monkeypatch,
                                                             caplog):
    fire_schedule = schedules.fire_schedule

    def fire_then_kill_after_the_second(schedule, **kwargs):
        report = fire_schedule(schedule, **kwargs)
        if schedule.name == "lost-b":
            end_this_session()
        return report

    monkeypatch.setattr(schedules, "fire_schedule", fire_then_kill_after_the_second)
    caplog.set_level(logging.INFO)

    report = schedules.fire_due_schedules(now=tick_times)

    assert report.lost
    said = problems(caplog)
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].exc_info is None
    assert "the database connection was lost at schedule lost-c" in said[0].getMessage()
    assert slot_runs() == {"lost-a": 1, "lost-b": 1, "lost-c": 0, "lost-d": 0}
    monkeypatch.undo()

    the_next_tick_starts_the_rest_once(tick_times, ["lost-a", "lost-b"], caplog)


def test_a_session_killed_while_a_slots_run_is_created_is_said_once(tick_times, monkeypatch,
                                                                   caplog):
    refuse_if_paused = schedules.refuse_if_paused

    def kill_in_the_creation_of_lost_b(state):
        # start_run's guard: called in the transaction that inserts the slot's run.
        if state.name == "lost-b":
            end_this_session()
        refuse_if_paused(state)

    monkeypatch.setattr(schedules, "refuse_if_paused", kill_in_the_creation_of_lost_b)
    caplog.set_level(logging.INFO)

    report = schedules.fire_due_schedules(now=tick_times)

    assert report.lost
    said = problems(caplog)
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].exc_info is None
    assert "the database connection was lost at schedule lost-b" in said[0].getMessage()
    # The tick went no further than the run being created: it was never committed.
    assert slot_runs() == {"lost-a": 1, "lost-b": 0, "lost-c": 0, "lost-d": 0}
    monkeypatch.undo()

    the_next_tick_starts_the_rest_once(tick_times, ["lost-a"], caplog)
