"""A paused schedule does not run, so it does not alert: a failing schedule that is paused
keeps its failure on its row to be shown, its paused ticks change nothing, and its resume
clears it. The first tick after the resume says again: failing (one new record, one ERROR
line) if the failure persists, nothing if it was fixed meanwhile."""

import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import ControlRecord, Run, ScheduleState
from runs.waiting.schedules import fire_due_schedules, set_paused
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db


@pytest.fixture
def start():
    return timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=10)


def at(start, minutes):
    return start + timedelta(minutes=minutes)


def raising(slot):
    raise RuntimeError("input service gone")


def actions_of(name):
    return list(ControlRecord.objects.filter(target=name).order_by("id")
                .values_list("action", flat=True))


def errors_of(caplog, name):
    return [r for r in caplog.records
            if r.levelno == logging.ERROR and f"schedule {name} of" in r.getMessage()]


def pause(name, paused, now):
    set_paused(workflow="test-scheduled", name=name, paused=paused, actor=SYSTEM,
               reason="incident 42", now=now)


@pytest.fixture
def failing_then_paused(declared_schedule, start):
    """The schedule "flaky", failed at two ticks and then paused."""
    schedule = declared_schedule("flaky", input=raising)
    for n in (0, 1, 2):
        fire_due_schedules(now=at(start, n))
    pause("flaky", True, at(start, 2.5))
    return schedule


def test_a_failing_schedule_paused_keeps_its_failure_to_show_and_its_ticks_change_nothing(
        failing_then_paused, start):
    fire_due_schedules(now=at(start, 3))
    state = ScheduleState.objects.get(name="flaky")
    assert state.paused and state.failing_since == at(start, 1) and state.failures == 2
    assert actions_of("flaky") == ["schedule_failing", "schedule_paused"]


def test_a_resumed_schedule_whose_failure_persists_is_failing_again_from_its_next_tick(
        failing_then_paused, start, caplog):
    caplog.set_level(logging.INFO)
    pause("flaky", False, at(start, 4))
    state = ScheduleState.objects.get(name="flaky")
    assert (state.failing_since, state.failures, state.last_error) == (None, 0, "")
    fire_due_schedules(now=at(start, 5))
    state = ScheduleState.objects.get(name="flaky")
    assert state.failing_since == at(start, 5) and state.failures == 1
    assert state.last_error == "RuntimeError: input service gone"
    assert actions_of("flaky") == ["schedule_failing", "schedule_paused", "schedule_resumed",
                                   "schedule_failing"]
    assert len(errors_of(caplog, "flaky")) == 1


def test_a_resumed_schedule_fixed_meanwhile_starts_its_run_and_says_nothing_more(
        failing_then_paused, start):
    failing_then_paused.input = lambda slot: {"slot": slot.isoformat()}
    pause("flaky", False, at(start, 4))
    fire_due_schedules(now=at(start, 5))
    assert Run.objects.filter(business_key__startswith="schedule:flaky:").count() == 1
    assert ScheduleState.objects.get(name="flaky").failing_since is None
    assert actions_of("flaky") == ["schedule_failing", "schedule_paused", "schedule_resumed"]
