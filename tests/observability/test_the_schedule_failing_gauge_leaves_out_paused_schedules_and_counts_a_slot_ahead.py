"""durable_schedule_failing, which DurableScheduleFailing reads: a paused schedule does not
run, so it reads 0 while paused however it failed before, and stays 0 after its resume until
a tick fails again; a schedule whose last slot lies ahead of the database's clock reads 1
until the clock catches up."""

from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from runs import store
from runs.models import ScheduleState
from runs.waiting.schedules import fire_due_schedules, set_paused
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db


@pytest.fixture
def start():
    return timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=10)


def at(start, minutes):
    return start + timedelta(minutes=minutes)


def gauge(client, name):
    body = client.get("/metrics").content.decode()
    return {s.labels["schedule"]: s.value for f in text_string_to_metric_families(body)
            for s in f.samples if s.name == "durable_schedule_failing"}[name]


def raising(slot):
    raise RuntimeError("input service gone")


def test_a_failing_schedule_reads_0_while_paused_and_1_again_when_its_next_tick_fails(
        client, declared_schedule, start):
    declared_schedule("flaky", input=raising)
    fire_due_schedules(now=at(start, 0))
    fire_due_schedules(now=at(start, 1))
    assert gauge(client, "flaky") == 1
    set_paused(workflow="test-scheduled", name="flaky", paused=True, actor=SYSTEM,
               reason="incident 42", now=at(start, 1.5))
    assert gauge(client, "flaky") == 0
    fire_due_schedules(now=at(start, 2))
    assert gauge(client, "flaky") == 0
    set_paused(workflow="test-scheduled", name="flaky", paused=False, actor=SYSTEM,
               reason="incident over", now=at(start, 3))
    assert gauge(client, "flaky") == 0
    fire_due_schedules(now=at(start, 4))
    assert gauge(client, "flaky") == 1


def test_a_schedule_whose_last_slot_is_ahead_of_the_clock_reads_1_until_it_catches_up(
        client, declared_schedule, start):
    declared_schedule("set-back")
    fire_due_schedules(now=at(start, 0))
    # Ahead of the database's clock, as after the clock was set back.
    ScheduleState.objects.filter(name="set-back").update(
        last_slot_at=store.current().now() + timedelta(minutes=5))
    fire_due_schedules()
    assert gauge(client, "set-back") == 1
    fire_due_schedules()
    assert gauge(client, "set-back") == 1
    # The clock catching up, played by moving the slot back behind it.
    ScheduleState.objects.filter(name="set-back").update(last_slot_at=at(start, 4.5))
    fire_due_schedules(now=at(start, 4))
    assert gauge(client, "set-back") == 0
