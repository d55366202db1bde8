"""A schedule's input, checked where it is declared instead of at each tick only. A fixed
input (a dict) that a start refuses (the workflow's input schema, or a wait's function of
the input: a sleep's until, an event wait's correlate) had every tick's start refused: the
schedule failed in production from its first slot on, and never started a run.

Each tick starts the latest registered version of the workflow (start_run), so that version is
the one a fixed input is held to, by the one check a start applies to its input
(transitions.admitted_input): when the schedule is declared (runs.waiting.schedules
.Schedule), when a later version is registered, which is refused if the fixed input of a
registered schedule does not fit it (definition.registry.check_each), and once the workflow
modules are imported (check_fixed_inputs, from runs.apps). The last is where a wait is
sure to be known: a module may declare a schedule before its workflow's steps, and a later
version is registered before its steps are declared.

A function of the slot is checked to be one that takes the slot; what it returns depends on
the slot, so it is checked at each tick, where a refusal shows the schedule failing
(runs.waiting.schedule_health). start_run checks a fixed input at each tick too: a schema's
own validators may depend on the time or on other data, and what fitted once may not."""

from collections.abc import Iterable
from datetime import UTC, datetime

from ..definitions import definition, validation
from ..machine.errors import InvalidInput
from ..machine.transitions import admitted_input
from .schedule_errors import ScheduleError


def started_version(workflow: definition.Workflow) -> definition.Workflow:
    """The version of `workflow` that a tick starts: the latest registered under its name, or
    `workflow` itself when no later one is (it may be declared with register=False)."""
    latest = definition.registry.latest(workflow.name)
    return latest if latest is not None and latest.version > workflow.version else workflow


def input_problem(schedule, workflow: definition.Workflow) -> str | None:
    """Why `schedule`, as declared, can start no run of `workflow` (the version its ticks
    start), or None. The refusal says where and why as the schema or the wait says it, never
    the values (Workflow.parse_input)."""
    given = schedule.input
    if callable(given):
        return validation.role_problem(given, role="input function", takes="input(slot)")
    if not isinstance(given, dict):
        return (f"input must be a dict, or a function of the slot returning one, not "
                f"{type(given).__name__}")
    try:
        check_admitted(schedule, workflow)
    except InvalidInput as exc:
        return (f"its input is refused by {validation.where(workflow)}, which each of its "
                f"ticks would start: {exc}")
    return None


def check_admitted(schedule, workflow: definition.Workflow) -> None:
    """InvalidInput if a start of `workflow` refuses `schedule`'s fixed input, as each tick's
    start would. The business key given is of the form a tick's is; the checks read no slot
    in it."""
    admitted_input(workflow, schedule.input,
                   business_key=schedule.business_key(datetime.now(UTC)))


def check_version(schedules: Iterable, workflow: definition.Workflow) -> None:
    """Refuse `workflow`, a version about to be registered, if ticks would start it and it
    refuses the fixed input of one of `schedules` (those registered): naming the version and
    the schedule. Nothing is registered then; the schedule or the version is to be changed.
    Its steps are declared after it: its waits hold the input to them at check_fixed_inputs."""
    latest = definition.registry.latest(workflow.name)
    if latest is not None and latest.version > workflow.version:
        return  # the ticks go on starting the later one
    for schedule in schedules:
        if schedule.workflow_name != workflow.name or callable(schedule.input):
            continue
        try:
            check_admitted(schedule, workflow)
        except InvalidInput as exc:
            raise validation.DefinitionError(
                f"{validation.where(workflow)}: schedule {schedule.name!r} would start this "
                f"version at each tick with its fixed input, which the version refuses: "
                f"{exc}") from None


def check_fixed_inputs(schedules: Iterable) -> None:
    """ScheduleError naming the first of `schedules` whose input a start of the version its
    ticks start refuses: called once the workflow modules are imported (runs.apps), when
    every version's steps, and so every wait, are declared; the process stops there, as it
    does for a workflow declared wrongly."""
    for schedule in schedules:
        if (problem := input_problem(schedule, started_version(schedule.workflow))) is not None:
            raise ScheduleError(f"schedule {schedule.name!r}: {problem}")
