"""`schedules tick --now`: a replay of a scheduler tick in the past (what beat does, at an
earlier time); a time ahead of the clock or no date at all is refused and nothing is
written. A replay judges no schedule ahead of the clock for the slots handled since its
time, and its report names the slots it refused."""

import json
from datetime import UTC, timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from runs import store
from runs.models import ControlRecord, Run, ScheduleState
from runs.waiting.schedules import fire_due_schedules

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



def failing_gauge(client, name):
    body = client.get("/metrics").content.decode()
    return {s.labels["schedule"]: s.value for f in text_string_to_metric_families(body)
            for s in f.samples if s.name == "durable_schedule_failing"}[name]


def test_a_tick_replayed_before_the_slots_handled_since_leaves_every_schedule_healthy(
        client, declared_schedule, capsys):
    declared_schedule("healthy")
    fire_due_schedules()                                  # first sight, by the clock
    two_hours_back = store.current().now() - timedelta(hours=2)
    call_command("schedules", "tick", "--now", two_hours_back.isoformat())
    capsys.readouterr()
    for state in ScheduleState.objects.all():
        assert (state.ahead_of_clock, state.failing_since, state.failures,
                state.last_error) == (False, None, 0, ""), state.name
    assert not ControlRecord.objects.exists()
    call_command("schedules", "list")
    assert "FAILING" not in capsys.readouterr().out
    assert failing_gauge(client, "healthy") == 0
    # The next tick by the clock has nothing to recover from.
    fire_due_schedules()
    assert not ControlRecord.objects.exists()


def test_a_tick_prints_the_slots_it_refused(declared_schedule, capsys):
    declared_schedule("refused", input=lambda slot: {"wrong": 1})
    start = timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=10)
    call_command("schedules", "tick", "--now", start.isoformat())
    capsys.readouterr()
    call_command("schedules", "tick", "--now", (start + timedelta(minutes=1)).isoformat())
    report = json.loads(capsys.readouterr().out)
    slot = (start + timedelta(seconds=30)).astimezone(UTC).isoformat()
    assert len(report["refused"]) == 1
    assert report["refused"][0].startswith(f"test-scheduled/refused {slot}: ")
    assert "does not match its schema" in report["refused"][0]
    assert report["failed"] == []
    assert not Run.objects.filter(business_key__startswith="schedule:refused:").exists()
