"""A sleep's wake time the database cannot hold and give back (after 9999-12-31 UTC, before
year 1 UTC, or a duration past the year 9999) would leave the run unreadable for ever:
PostgreSQL keeps 10000-01-01, psycopg cannot load it. The step fails at once as a permanent
error of the workflow's code, naming the time, and the run waits for a person, readable; a
far but sensible time still sleeps. A start whose until() gives such a time is refused
(tests/runs/test_a_start_whose_input_a_waits_until_or_correlate_fails_with_is_refused_naming_the_step.py):
here a release gives it after the start."""

from datetime import datetime, timedelta, timezone

import pytest

from runs.definitions.definition import Workflow, registry
from runs.execution import executor
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, StepStatus
from tests.factories import new_run, step
from tests.workflows import OrderIn

pytestmark = pytest.mark.django_db

NEW_YORK = timezone(timedelta(hours=-5))
TOKYO = timezone(timedelta(hours=9))


@pytest.fixture
def sleeps():
    """Declare a workflow "test-sleep-at" whose one sleep is until=... or duration=..."""
    declared = []

    def declare(**when):
        flow = Workflow("test-sleep-at", version=1, input=OrderIn)
        flow.sleep("nap", **when)
        declared.append(flow)
        return flow

    yield declare
    for flow in declared:
        registry.unregister(flow)


@pytest.mark.parametrize("when, named", [
    (dict(until=lambda data: datetime(9999, 12, 31, 23, 0, tzinfo=NEW_YORK)),
     "9999-12-31T23:00:00-05:00 is after what the database can keep"),
    (dict(until=lambda data: datetime(1, 1, 1, 3, 0, tzinfo=TOKYO)),
     "0001-01-01T03:00:00+09:00 is before what the database can keep"),
    (dict(duration=timedelta(days=999_999_999)), "+ 999999999 days, 0:00:00 is past the year"),
])
def test_the_step_fails_naming_the_time_and_the_run_stays_readable(script, sleeps, monkeypatch,
                                                                   when, named):
    nap = sleeps(duration=timedelta(hours=1)).step("nap")
    run = new_run("test-sleep-at")
    monkeypatch.setattr(nap, "sleep_for", when.get("duration"))
    monkeypatch.setattr(nap, "sleep_until", when.get("until"))
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    run = Run.objects.get(pk=run.pk)  # every column read back
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    assert run.next_wake_at is None and named in run.status_message
    nap = step(run, "nap")
    assert nap.status == StepStatus.FAILED and nap.error_class == ErrorClass.PERMANENT
    assert named in nap.error_message and nap.next_attempt_at is None
    assert list(Run.objects.filter(pk=run.pk).values_list("status", flat=True)) == \
        [RunStatus.ATTENTION]


def test_a_far_but_sensible_time_still_sleeps(script, sleeps):
    sleeps(until=lambda data: datetime(9000, 6, 1, tzinfo=NEW_YORK))
    run = new_run("test-sleep-at")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    run = Run.objects.get(pk=run.pk)
    assert run.next_wake_at == datetime(9000, 6, 1, tzinfo=NEW_YORK)
    assert step(run, "nap").status == StepStatus.WAITING
