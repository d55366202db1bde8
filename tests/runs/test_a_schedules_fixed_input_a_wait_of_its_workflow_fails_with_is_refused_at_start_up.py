"""A schedule's fixed input is held to every check a start applies to an input, the waits'
too: a wait's function of the input (a sleep's until, an event wait's correlate) that raises
on it, or gives what the wait cannot use, had every tick's start refused, and the schedule
failed in production from its first slot on. It is refused as the schedule is declared,
naming the schedule, the step and what is wrong, and the schedule is not registered.

A module may declare a schedule before its workflow's steps, and a later version of the
workflow is registered before its steps are declared: so the fixed inputs are checked again
once the workflow modules are imported (runs.apps), which stops the process naming the
schedule, as a workflow declared wrongly does."""

import subprocess
import sys
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from runs.definitions import definition
from runs.models import Run, ScheduleState
from runs.waiting import schedule_input, schedules
from runs.waiting.schedules import Schedule, ScheduleError, fire_schedule
from tests.processes import ROOT, child_env

NAME = "test-schedule-waits"
T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


class OrderIn(BaseModel):
    region: str
    po_number: str | None = None
    deliver_at: str | None = None


def deliver_at(input):
    return datetime.fromisoformat(input["deliver_at"])


def po_number(input):
    return input["po_number"]


@pytest.fixture
def workflow():
    """A workflow registered for one test, with the schedules and versions the test adds,
    all removed after it."""
    made = []

    def declare(version=1):
        made.append(definition.Workflow(NAME, version=version, input=OrderIn))
        return made[-1]

    yield declare
    for schedule in schedules.registry.all():
        if schedule.workflow_name == NAME:
            schedules.registry.remove(schedule)
    for each in made:
        definition.registry.unregister(each)


def fetch(ctx):
    return {}


def with_waits(workflow):
    workflow.read("fetch")(fetch)
    workflow.sleep("until-delivery", until=deliver_at)
    workflow.wait_for_event("payment", event="payment.settled", correlate=po_number)
    return workflow


def daily(workflow, given, **options):
    return Schedule(workflow, "daily", every=timedelta(days=1), input=given, **options)


@pytest.mark.django_db
def test_a_fixed_input_a_waits_correlate_raises_on_is_refused_as_the_schedule_is_declared(
        workflow):
    with pytest.raises(ScheduleError) as refused:
        daily(with_waits(workflow()),
              {"region": "eu", "deliver_at": "2026-03-03T09:00:00+01:00"})
    assert str(refused.value) == (
        f"schedule 'daily': its input is refused by workflow {NAME} v1, which each of its "
        f"ticks would start: input for {NAME} is refused: step 'payment': its "
        "correlate(input) returned None, not the correlation key as text")
    assert schedules.registry.get(NAME, "daily") is None
    assert not ScheduleState.objects.exists() and not Run.objects.exists()


def test_a_fixed_input_a_sleeps_until_fails_with_is_refused_naming_each_wait(workflow):
    with pytest.raises(ScheduleError) as refused:
        daily(with_waits(workflow()), {"region": "eu", "deliver_at": "2026-03-03T09:00:00"})
    assert str(refused.value) == (
        f"schedule 'daily': its input is refused by workflow {NAME} v1, which each of its "
        f"ticks would start: input for {NAME} is refused: step 'until-delivery': its "
        "until(input) returned a datetime without a time zone (2026-03-03T09:00:00): declare "
        "the input field as AwareDatetime or give it a zone; step 'payment': its "
        "correlate(input) returned None, not the correlation key as text")
    assert schedules.registry.get(NAME, "daily") is None


@pytest.mark.django_db
def test_a_fixed_input_every_wait_takes_is_declared_and_its_slots_start(workflow):
    schedule = daily(with_waits(workflow()),
                     {"region": "eu", "po_number": "po-7",
                      "deliver_at": "2026-03-03T09:00:00+01:00"}, catch_up="latest")
    assert schedules.registry.get(NAME, "daily") is schedule
    fire_schedule(schedule, now=T0)
    report = fire_schedule(schedule, now=T0 + timedelta(days=1))
    assert len(report.started) == 1 and report.refused == []


def test_a_schedule_declared_before_its_workflows_waits_is_refused_once_the_modules_are_loaded(
        workflow):
    declared = workflow()
    schedule = daily(declared, {"region": "eu", "deliver_at": "2026-03-03T09:00:00+01:00"})
    with_waits(declared)
    with pytest.raises(ScheduleError) as refused:
        schedule_input.check_fixed_inputs([schedule])
    assert str(refused.value) == (
        f"schedule 'daily': its input is refused by workflow {NAME} v1, which each of its "
        f"ticks would start: input for {NAME} is refused: step 'payment': its "
        "correlate(input) returned None, not the correlation key as text")


def test_a_later_version_whose_wait_refuses_a_schedules_fixed_input_is_refused_once_loaded(
        workflow):
    fixed = {"region": "eu", "deliver_at": "2026-03-03T09:00:00+01:00"}
    first = workflow(1)
    first.read("fetch")(fetch)
    schedule = daily(first, fixed)
    # Registered before its steps are declared: nothing to hold the input to yet.
    with_waits(workflow(2))
    with pytest.raises(ScheduleError) as refused:
        schedule_input.check_fixed_inputs([schedule])
    assert f"refused by workflow {NAME} v2, which each of its ticks" in str(refused.value)
    assert "step 'payment': its correlate(input) returned None" in str(refused.value)


def test_a_schedule_of_the_slot_or_one_whose_input_every_wait_takes_passes_once_loaded(
        workflow):
    declared = with_waits(workflow())
    schedule_input.check_fixed_inputs([
        daily(declared, {"region": "eu", "po_number": "po-7",
                         "deliver_at": "2026-03-03T09:00:00+01:00"}),
        # What a function of the slot gives depends on the slot: each tick checks it.
        Schedule(declared, "by-slot", every=timedelta(hours=1),
                 input=lambda slot: {"region": slot.isoformat()}),
    ])


DECLARED_BEFORE_ITS_WAITS = """
from datetime import timedelta

from pydantic import BaseModel

from runs.definitions.definition import Workflow
from runs.waiting.schedules import Schedule


class OrderIn(BaseModel):
    region: str
    po_number: str | None = None


orders = Workflow("test-schedule-before-waits", version=1, input=OrderIn)
# Declared before the steps: the wait it fails is not known yet when it is declared.
Schedule(orders, "nightly-orders", every=timedelta(days=1), input={"region": "eu"})
orders.wait_for_event("payment", event="payment.settled",
                      correlate=lambda input: input["po_number"])
"""


def test_a_workflow_module_with_a_schedule_a_wait_refuses_stops_django_setup(tmp_path):
    (tmp_path / "schedule_before_waits.py").write_text(DECLARED_BEFORE_ITS_WAITS)
    started = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
        env=child_env(RUNS_EXTRA_WORKFLOW_MODULES="schedule_before_waits",
                      PYTHONPATH=f"{tmp_path}:{ROOT}",
                      DJANGO_SETTINGS_MODULE="console.settings"),
        capture_output=True, text=True, timeout=60)
    assert started.returncode != 0
    assert ("ScheduleError: schedule 'nightly-orders': its input is refused by workflow "
            "test-schedule-before-waits v1, which each of its ticks would start: input for "
            "test-schedule-before-waits is refused: step 'payment': its correlate(input) "
            "returned None, not the correlation key as text" in started.stderr), started.stderr
