"""A scheduler tick judges which slots are due by the database's clock, not its host's: run
from a host whose clock runs a day ahead, it starts no run for a slot the database has not
reached, and records no such slot as handled."""

import json
from datetime import timedelta

import pytest

from runs import store
from runs.models import Run, ScheduleState
from runs.waiting.schedules import fire_due_schedules
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

DAY = 24 * 3600
KEY = "schedule:every-minute:"


def test_a_tick_from_a_host_a_day_ahead_starts_only_the_slots_the_database_clock_reached():
    # First sight of tests.workflows.every_minute (catch_up="all") three minutes ago.
    fire_due_schedules(now=store.current().now() - timedelta(minutes=3))
    process = manage("schedules", "tick", RUNS_TEST_CLOCK_OFFSET_SECONDS=DAY)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    clock = store.current().now()
    keys = list(Run.objects.filter(business_key__startswith=KEY)
                .values_list("business_key", flat=True))
    assert keys and len(report["started"]) == len(keys) <= 4
    # Not one run for a slot ahead of the database's clock, nor such a slot recorded.
    assert all(key.removeprefix(KEY) <= f"{clock:%Y-%m-%dT%H:%M:%S}Z" for key in keys)
    assert ScheduleState.objects.get(name="every-minute").last_slot_at <= clock
