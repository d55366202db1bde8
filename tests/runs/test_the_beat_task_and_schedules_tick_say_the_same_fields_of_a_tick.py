"""The beat task that fires the schedules (runs.fire_schedules) and `manage.py schedules
tick` give one account of a tick (TickReport.said): every field of its report, the refused
slots and failed schedules by name; the runs started and found as ids on the command line,
as how many in the task's result. Each built its own, and a field added to the report was
said by one and not the other (the refused slots, in the task's result)."""

import dataclasses
import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from runs.models import Run
from runs.tasks import fire_schedules
from runs.waiting.tick_report import TickReport

pytestmark = pytest.mark.django_db

FIELDS = {f.name for f in dataclasses.fields(TickReport)}


def tick(at) -> dict:
    out = io.StringIO()
    call_command("schedules", "tick", "--now", at.isoformat(), stdout=out)
    return json.loads(out.getvalue())


def test_the_task_and_the_command_say_every_field_of_a_tick(declared_schedule):
    declared_schedule("ok")
    declared_schedule("refused", input=lambda slot: {"wrong": 1})
    start = timezone.now().replace(second=30, microsecond=0) - timedelta(minutes=10)
    tick(start)
    before = set(Run.objects.values_list("pk", flat=True))

    said = tick(start + timedelta(minutes=1))
    started_by_the_command = set(Run.objects.values_list("pk", flat=True)) - before
    result = fire_schedules()

    assert set(said) == set(result) == FIELDS
    assert said["started"] == sorted(started_by_the_command) != []
    assert result["started"] == Run.objects.exclude(
        pk__in=before | started_by_the_command).count() > 0
    assert said["found"] == [] and result["found"] == 0
    for refused in (said["refused"], result["refused"]):
        assert refused and all(r.startswith("test-scheduled/refused ") for r in refused)
    assert said["failed"] == result["failed"] == []
    assert (said["locked_out"], said["lost"]) == (result["locked_out"], result["lost"]) \
        == (False, False)
    assert not Run.objects.filter(business_key__startswith="schedule:refused:").exists()
