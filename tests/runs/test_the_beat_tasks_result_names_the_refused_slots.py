"""The result of the beat task that fires the schedules (runs.fire_schedules) names each slot
whose start was refused and why, as `schedules tick` prints it: it said how many runs
started, were found, skipped or failed, and nothing of a refused slot, so a result backend
or the worker's log line of the result showed a tick that refused every slot as a quiet one."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run
from runs.tasks import fire_schedules
from runs.waiting.schedules import fire_due_schedules

pytestmark = pytest.mark.django_db


def test_a_refused_slot_is_named_in_the_tasks_result(declared_schedule):
    declared_schedule("refused", input=lambda slot: {"wrong": 1})
    # First sight a minute ago: the slot of the minute since is due at the task's tick.
    fire_due_schedules(now=timezone.now() - timedelta(minutes=1))

    result = fire_schedules()

    (refused,) = result["refused"]
    assert refused.startswith("test-scheduled/refused ")
    assert "does not match its schema" in refused
    assert result["failed"] == []
    assert not Run.objects.filter(business_key__startswith="schedule:refused:").exists()
