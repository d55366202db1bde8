"""A schedule's fixed input (the dict each tick starts a run with) was checked only at each
tick: one its workflow's input schema refuses was declared without a word, and in production
every tick's start was refused, the schedule failing from its first slot on. It is now
checked when the schedule is declared, against the version its ticks start (the latest
registered), with a ScheduleError naming the schedule, the workflow and what is wrong, and
the schedule is not registered; a later version of the workflow that would refuse the fixed
input of a registered schedule is itself refused, naming both, and not registered. An input
that is a function of the slot is checked to take the slot; what it returns depends on the
slot and is checked at each tick, as before."""

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import BaseModel

from runs.definitions import definition
from runs.definitions.validation import DefinitionError
from runs.models import Run, ScheduleState
from runs.waiting import schedules
from runs.waiting.schedules import Schedule, ScheduleError, fire_schedule
from tests.workflows import nightly

NAME = "test-schedule-input"
T0 = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


class DayIn(BaseModel):
    day: str


class RegionIn(BaseModel):
    region: str


def declare(workflow=nightly, **options):
    return Schedule(workflow, "daily", every=timedelta(days=1), **options)


@pytest.fixture(autouse=True)
def no_schedule_left():
    """A schedule a test registers (when its refusal fails) leaves with it: a tick and the
    schedules page work the whole registry."""
    yield
    for schedule in schedules.registry.all():
        if schedule.name == "daily":
            schedules.registry.remove(schedule)


@pytest.fixture
def throwaway():
    """Workflows registered for one test, unregistered after it."""
    made = []

    def workflow(version, schema):
        made.append(definition.Workflow(NAME, version=version, input=schema))
        return made[-1]

    yield workflow
    for schedule in schedules.registry.all():
        if schedule.workflow_name == NAME:
            schedules.registry.remove(schedule)
    for workflow in made:
        definition.registry.unregister(workflow)


@pytest.mark.django_db
def test_a_fixed_input_the_schema_refuses_is_refused_naming_the_schedule_and_the_workflow():
    with pytest.raises(ScheduleError) as refused:
        declare(input={"day": "monday"})
    assert str(refused.value) == (
        "schedule 'daily': its input is refused by workflow test-scheduled v1, which each "
        "of its ticks would start: input for test-scheduled does not match its schema: "
        "slot: Field required")
    assert schedules.registry.get("test-scheduled", "daily") is None
    assert not ScheduleState.objects.exists() and not Run.objects.exists()


@pytest.mark.parametrize("given, said", [
    ([("slot", "a")], "input must be a dict, or a function of the slot returning one, not list"),
    (None, "input must be a dict, or a function of the slot returning one, not NoneType"),
    (lambda: {"slot": "a"}, "its input function () cannot be called as input(slot)"),
])
def test_an_input_that_is_no_dict_nor_a_function_of_the_slot_is_refused(given, said):
    with pytest.raises(ScheduleError) as refused:
        declare(input=given)
    assert str(refused.value) == f"schedule 'daily': {said}"
    assert schedules.registry.get("test-scheduled", "daily") is None


def test_a_function_of_the_slot_is_not_called_when_declared():
    calls = []
    schedule = declare(input=lambda slot: calls.append(slot), register=False)
    assert calls == [] and callable(schedule.input)


@pytest.mark.django_db
def test_a_fixed_input_the_schema_takes_is_declared_and_each_slot_started_with_it():
    schedule = declare(input={"slot": "fixed"}, catch_up="latest", register=False)
    fire_schedule(schedule, now=T0)
    report = fire_schedule(schedule, now=T0 + timedelta(days=1))
    assert len(report.started) == 1 and report.refused == []
    assert Run.objects.get(pk=report.started[0]).input == {"slot": "fixed"}


def test_the_fixed_input_is_held_to_the_latest_version_the_ticks_start(throwaway):
    first = throwaway(1, DayIn)
    throwaway(2, RegionIn)
    with pytest.raises(ScheduleError) as refused:
        declare(first, input={"day": "monday"})
    assert str(refused.value) == (
        f"schedule 'daily': its input is refused by workflow {NAME} v2, which each of its "
        f"ticks would start: input for {NAME} does not match its schema: region: Field "
        "required")
    assert schedules.registry.get(NAME, "daily") is None
    # An input for the version the ticks start is taken, whichever version is named.
    assert declare(first, input={"region": "eu"}) is schedules.registry.get(NAME, "daily")


def test_a_later_version_that_refuses_a_schedules_fixed_input_is_refused_and_not_registered(
        throwaway):
    declare(throwaway(1, DayIn), input={"day": "monday"})
    with pytest.raises(DefinitionError) as refused:
        throwaway(2, RegionIn)
    assert str(refused.value) == (
        f"workflow {NAME} v2: schedule 'daily' would start this version at each tick with "
        f"its fixed input, which the version refuses: input for {NAME} does not match its "
        "schema: region: Field required")
    assert definition.registry.latest(NAME).version == 1
    assert definition.registry.get(NAME, 2) is None


def test_a_later_version_that_takes_the_fixed_input_or_a_schedule_of_the_slot_is_registered(
        throwaway):
    first = throwaway(1, DayIn)
    declare(first, input={"day": "monday"})
    Schedule(first, "by-slot", every=timedelta(hours=1),
             input=lambda slot: {"day": slot.isoformat()})
    throwaway(2, DayIn)
    assert definition.registry.latest(NAME).version == 2


@pytest.mark.django_db
def test_a_fixed_input_a_start_could_not_store_or_over_the_input_limit_is_refused(settings):
    with pytest.raises(ScheduleError, match="holds NUL characters"):
        declare(input={"slot": "a\x00b"})
    settings.RUNS_INPUT_MAX_BYTES = 64
    with pytest.raises(ScheduleError, match=r"is 111 bytes, over the limit of 64 bytes"):
        declare(input={"slot": "x" * 100})
    assert schedules.registry.get("test-scheduled", "daily") is None
    assert not ScheduleState.objects.exists() and not Run.objects.exists()


@pytest.mark.parametrize("name", ["x" * 201, "nightly\nreport", "night\u202ely", "a\x00b"])
def test_a_name_no_slots_business_key_or_state_row_could_hold_is_refused(name):
    with pytest.raises(ScheduleError, match="a schedule needs a name of at most 200 characters"):
        Schedule(nightly, name, every=timedelta(days=1), input=lambda slot: {"slot": "a"})
    assert not [s for s in schedules.registry.all() if s.name == name]
    # Its former name is held to the same rule.
    with pytest.raises(ScheduleError, match="renamed_from must be its former name, of at most"):
        declare(input=lambda slot: {"slot": "a"}, renamed_from=name)
