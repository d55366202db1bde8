"""Schedules: a workflow started on a cron expression or every fixed interval.

    Schedule(invoice_digest, "daily", cron="0 6 * * 1-5", timezone="Europe/Berlin",
             catch_up="latest", input=lambda slot: {"day": slot.date().isoformat()})

Each slot starts at most one run: the run's business key is derived from the slot
(`schedule:<name>:<slot in UTC>`), so the unique (workflow, business key) constraint of
start_run makes a second scheduler, a restarted beat or a redelivered tick find the run the
first one started instead of starting another. ScheduleState keeps, per schedule, the last
slot handled; a scheduler that dies after starting a run and before recording the slot
starts the same slot again on its next tick, and start_run finds the run. A schedule a
release renames says so (`renamed_from="old"`): it goes on from the old name's slots, and
finds the runs the old name started (runs.waiting.schedule_state).

After downtime (beat stopped, every worker gone) several slots are due at once; the
schedule's catch-up policy says which of them run:
  "skip"    only slots at most `grace` old (the missed ones are skipped),
  "latest"  the most recent due slot, however late,
  "all"     every missed slot, oldest first (at most MAX_CATCH_UP per tick).

The sweeper's beat calls fire_due_schedules every few seconds (runs.fire_schedules). A
schedule whose ticks fail, or whose last slot handled lies ahead of the clock, is recorded on
its row and said once (runs.waiting.schedule_health).
"""

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from django.db import connection, transaction

from audit.chain import Actor
from audit.redaction import redact_text

from .. import store
from ..definitions import definition
from ..machine.errors import CODE_FAILURES, StartRefused, described
from ..machine.single_pass import single_pass
from ..machine.storable import person_text_problem
from ..machine.transitions import start_run
from ..models import ControlRecord, ScheduleState
from . import cron_slots, schedule_health, schedule_input
from .schedule_errors import ScheduleError
from .schedule_state import (
    NAME_MAX,
    handled_up_to,
    record_progress,
    run_under_old_name,
    state_of,
    valid_name,
)
from .tick_report import TickReport
from .tick_time import check_tick_time, tick_instant

logger = logging.getLogger(__name__)

JOB = "runs.waiting.schedules"
CATCH_UP_POLICIES = ("skip", "latest", "all")
# Slots started per schedule and tick under catch_up="all": a long outage is caught up over
# several ticks, not in one pass that holds the job for minutes.
MAX_CATCH_UP = 100
# Missed cron slots counted one by one at most (about a tenth of a second); past it, "or more".
MAX_COUNTED_MISSED = 10_000
# Where interval slots are counted from: slots of "every 15 minutes" fall on :00, :15, ...
INTERVAL_ANCHOR = datetime(2000, 1, 1, tzinfo=UTC)
KEY_PREFIX = "schedule:"
# Where the last slot before a time is looked for, nearest first, up to a year back.
LATEST_SLOT_WINDOWS = (timedelta(hours=1), timedelta(days=2), timedelta(days=32),
                       timedelta(days=366))


class PausedMeanwhile(Exception):
    """The schedule was paused after its tick read it, before a slot's run was created."""


@dataclass
class Schedule:
    workflow: definition.Workflow
    name: str
    cron: str = ""
    every: timedelta | None = None
    timezone: str = "UTC"
    catch_up: str = "skip"
    # A slot later than this when its tick comes is "missed" (catch-up policy applies).
    grace: timedelta = timedelta(minutes=5)
    # The run's input for a slot: a dict, or a function of the slot (aware, in `timezone`).
    # It must give the same input for the same slot (start_run refuses a different one).
    input: dict | Callable[[datetime], dict] = field(default_factory=dict)
    # The name a release changed: the new name goes on from the old one's slots and runs
    # (runs.waiting.schedule_state).
    renamed_from: str = ""
    register: bool = True

    def __post_init__(self):
        if not valid_name(self.name):
            raise ScheduleError(f"a schedule needs a name of at most {NAME_MAX} characters, "
                                "without ':', surrounding spaces or control characters, not "
                                f"{self.name!r}")
        if self.renamed_from and (not valid_name(self.renamed_from)
                                  or self.renamed_from == self.name):
            raise ScheduleError(f"schedule {self.name!r}: renamed_from must be its former "
                                f"name, of at most {NAME_MAX} characters, without ':', "
                                f"surrounding spaces or control characters, not "
                                f"{self.renamed_from!r}")
        if not isinstance(self.workflow, definition.Workflow):
            raise ScheduleError(f"schedule {self.name!r}: workflow must be the Workflow it "
                                f"starts, not {self.workflow!r}")
        if bool(self.cron) == (self.every is not None):
            raise ScheduleError(f"schedule {self.name!r}: give either cron or every, not "
                                "both or neither")
        try:
            # "localtime" is the zone of whichever host ticks, not a time zone: beat moved to
            # a host set otherwise would start each slot at another instant, under a new key.
            self.zone = ZoneInfo(self.timezone) if self.timezone != "localtime" else None
        except (ZoneInfoNotFoundError, ValueError, TypeError):
            self.zone = None
        if self.zone is None:
            raise ScheduleError(f"schedule {self.name!r}: unknown time zone "
                                f"{self.timezone!r}")
        if self.cron:
            try:
                CronSim(self.cron, datetime.now(self.zone))
            except (CronSimError, TypeError, AttributeError) as exc:
                raise ScheduleError(f"schedule {self.name!r}: cron expression {self.cron!r} "
                                    f"is not valid: {exc}") from None
        elif not isinstance(self.every, timedelta):
            raise ScheduleError(f"schedule {self.name!r}: every must be a timedelta, not "
                                f"{self.every!r}")
        elif self.every <= timedelta(0):
            raise ScheduleError(f"schedule {self.name!r}: every must be positive")
        elif self.every % timedelta(seconds=1):
            # A slot's business key keeps it to the second: two slots within one second
            # would be one run, the second slot lost in the first.
            raise ScheduleError(f"schedule {self.name!r}: every must be a whole number of "
                                f"seconds, not {self.every}")
        if not isinstance(self.grace, timedelta) or self.grace < timedelta(0):
            raise ScheduleError(f"schedule {self.name!r}: grace must be a timedelta of zero "
                                f"or more, not {self.grace!r}")
        if self.catch_up not in CATCH_UP_POLICIES:
            raise ScheduleError(f"schedule {self.name!r}: catch_up must be one of "
                                f"{', '.join(CATCH_UP_POLICIES)}, not {self.catch_up!r}")
        if self.catch_up != "all" and reaches_before_year_one(self.grace, self.every):
            # A tick looks back the grace and an interval from now for the missed slots:
            # every tick failed with "date value out of range", and no slot ever ran.
            raise ScheduleError(f"schedule {self.name!r}: grace {self.grace}"
                                f"{f' and every {self.every}' if self.every else ''} reach "
                                "back from now past the year 1, which no date holds (to run "
                                "every missed slot, declare catch_up='all')")
        started = schedule_input.started_version(self.workflow)
        # Against the steps declared so far; once the modules are loaded, against them all
        # (schedule_input.check_fixed_inputs).
        if (problem := schedule_input.input_problem(self, started)) is not None:
            raise ScheduleError(f"schedule {self.name!r}: {problem}")
        if self.register:
            registry.add(self)

    @property
    def workflow_name(self) -> str:
        return self.workflow.name

    @property
    def expression(self) -> str:
        return self.cron or f"every {self.every}"

    def slots_after(self, start: datetime) -> Iterator[datetime]:
        """The slots strictly after `start`, in order, as aware datetimes in the zone."""
        start = start.astimezone(self.zone)
        if self.cron:
            yield from cron_slots.slots_after(self.cron, start)
            return
        step = self.every
        n = (start - INTERVAL_ANCHOR) // step + 1
        while True:
            yield (INTERVAL_ANCHOR + n * step).astimezone(self.zone)
            n += 1

    def latest_slot(self, at: datetime) -> datetime | None:
        """The last slot at or before `at` (looking back at most a year for a cron)."""
        if self.every is not None:
            n = (at - INTERVAL_ANCHOR) // self.every
            return (INTERVAL_ANCHOR + n * self.every).astimezone(self.zone)
        # Nearest window first: a cron firing every second has 31 million slots in a year,
        # minutes of counting under the scheduler's lock. (cronsim's reverse iteration is
        # not used: it skips a slot in a daylight-saving overlap.)
        for window in LATEST_SLOT_WINDOWS:
            latest = None
            for slot in self.slots_after(at - window):
                if slot > at:
                    break
                latest = slot
            if latest is not None:
                return latest
        return None

    def next_slots(self, after: datetime, count: int = 3) -> list[datetime]:
        slots = self.slots_after(after)
        return [next(slots) for _ in range(count)]

    def upcoming(self, after: datetime, count: int = 3) -> tuple[list[datetime], str]:
        """The next `count` slots after `after`, for a person, or as many as there are
        before the end of the calendar and why the next cannot be worked out."""
        slots = []
        try:
            for slot in self.slots_after(after):
                slots.append(slot)
                if len(slots) == count:
                    break
        except OverflowError:
            return slots, "the next slot cannot be computed: it falls past the year 9999"
        return slots, ""

    def business_key(self, slot: datetime, *, name: str = "") -> str:
        return (f"{KEY_PREFIX}{name or self.name}:"
                f"{slot.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}")

    def input_for(self, slot: datetime) -> dict:
        return self.input(slot) if callable(self.input) else dict(self.input)


class ScheduleRegistry:
    def __init__(self):
        self._schedules: dict[tuple[str, str], Schedule] = {}

    def add(self, schedule: Schedule) -> None:
        key = (schedule.workflow_name, schedule.name)
        if self._schedules.get(key, schedule) is not schedule:
            # The second replaced the first without a word, and the first's slots never ran:
            # both would start their runs under the same slot keys.
            raise ScheduleError(f"schedule {schedule.name!r} of {schedule.workflow_name}: "
                                "declared twice (schedule names are unique within a "
                                "workflow)")
        self._schedules[key] = schedule

    def remove(self, schedule: Schedule) -> None:
        self._schedules.pop((schedule.workflow_name, schedule.name), None)

    def keys(self) -> frozenset:
        return frozenset(self._schedules)

    def get(self, workflow: str, name: str) -> Schedule | None:
        return self._schedules.get((workflow, name))

    def all(self) -> list[Schedule]:
        return sorted(self._schedules.values(), key=lambda s: (s.workflow_name, s.name))


def reaches_before_year_one(grace: timedelta, every: timedelta | None) -> bool:
    try:
        datetime.now(UTC) - grace - (every or timedelta(0))
    except OverflowError:
        return True
    return False


registry = ScheduleRegistry()
# A later version of a workflow is held to the fixed input of the schedules that would start it.
definition.registry.check_each(lambda workflow: schedule_input.check_version(registry.all(),
                                                                             workflow))


def fire_due_schedules(*, now: datetime | None = None) -> TickReport:
    """One tick of the scheduler, unless another scheduler is ticking (then nothing: it is
    already at the work). `now` (a replayed tick) may lie in the past, not in the future."""
    if now is not None:
        check_tick_time(now)
    with single_pass(JOB) as mine:
        if not mine:
            return TickReport(locked_out=True)
        # The database's clock says which slots are due: a host whose clock runs ahead would
        # start slots before their time and record them as handled.
        now = now or store.current().now()
        report = TickReport()
        for schedule in registry.all():
            try:
                report.add(fire_schedule(schedule, now=now), schedule=schedule)
            except Exception as exc:  # noqa: BLE001 - a broken schedule stops no other
                if store.session_ended(exc):
                    # Every later schedule would fail on the dead session, a traceback each,
                    # and the pass lock went with it: stop; the next tick fires what is due.
                    schedule_health.connection_lost(exc, name=schedule.name, started=len(
                        report.started), workflow=schedule.workflow_name)
                    report.lost = True
                    break
                if store.refuses_writes(exc):  # so would every later one: the pass says it
                    raise  # once (database_outage.beat_pass), not a traceback per schedule
                # Its state could not be read or made (the database): nothing to record on.
                logger.exception("schedule %s of %s: tick failed", schedule.name,
                                 schedule.workflow_name)
                report.failed.append(f"{schedule.workflow_name}/{schedule.name}")
    if report.lost:
        connection.close()  # past the pass lock: the next tick opens a session of its own
    return report


def due_slots(schedule: Schedule, state: ScheduleState, *, now: datetime
              ) -> tuple[list[datetime], int]:
    """The slots this tick starts, after the catch-up policy, and how many it skips."""
    if state.last_slot_at is not None and state.last_slot_at >= now:
        # Nothing is due; not counting on from a recorded slot far in the future either
        # (counting from near the end of the calendar overflows).
        return [], 0
    start, passed = state.last_slot_at or now, 0
    if schedule.catch_up != "all":
        # Only the last slots may run: the older ones are counted, not listed (a month's
        # outage of a 10 s schedule is 260,000 slots, seconds under the scheduler's lock).
        start, passed = _past_the_missed(schedule, start, now)
    slots = []
    for slot in schedule.slots_after(start):
        if slot > now:
            break
        slots.append(slot)
        if schedule.catch_up == "all" and len(slots) >= MAX_CATCH_UP:
            break
    if schedule.catch_up == "latest":
        return slots[-1:], passed + max(len(slots) - 1, 0)
    if schedule.catch_up == "skip":
        on_time = [s for s in slots if now - s <= schedule.grace]
        return on_time, passed + len(slots) - len(on_time)
    return slots, 0


def _past_the_missed(schedule: Schedule, start: datetime, now: datetime
                     ) -> tuple[datetime, int]:
    """Where a tick under "skip" or "latest" looks for its slots from, and how many slots
    it passes over to get there: every slot before the last one older than the grace is
    missed whatever the policy, so it is counted, not listed."""
    if schedule.every is not None:
        later = max(start, now - schedule.grace - schedule.every)
        return later, ((later - INTERVAL_ANCHOR) // schedule.every
                       - (start - INTERVAL_ANCHOR) // schedule.every)
    # A cron's slots are counted one by one, unkept, up to MAX_COUNTED_MISSED ("or more" past
    # it); the tick goes on from the second before the last slot older than the grace, in UTC
    # (in the zone, 02:59:59 the night summer time begins does not exist: read an hour later).
    anchor = schedule.latest_slot(now - schedule.grace)
    if anchor is None or anchor <= start:
        return start, 0
    anchor, passed = anchor.astimezone(UTC), 0
    for slot in schedule.slots_after(start):
        if slot >= anchor or passed >= MAX_COUNTED_MISSED:
            break
        passed += 1
    return anchor - timedelta(seconds=1), passed


def fire_schedule(schedule: Schedule, *, now: datetime) -> TickReport:
    """Start the runs of `schedule`'s due slots and record the last one handled.

    Safe to run in several processes at once: each slot's run is started by start_run,
    whose unique business key lets one of them create it and the others find it; the
    recorded slot only ever moves forward. A tick that raises (listed in the report's
    `failed`) or whose every slot is refused is recorded as failed (schedule_health).
    `now` is any aware datetime, taken as the instant it is (tick_instant)."""
    now = tick_instant(now)
    state = state_of(schedule, now=now)
    if state.paused:  # a look without a lock; refuse_if_paused is the check that counts
        return TickReport()
    # Only the real clock can be behind the slots handled: a tick replayed at a past time has
    # every slot handled since then ahead of it, and is no reason to call a schedule failing
    # (nor, at the next tick, recovered).
    clock = store.current().now()
    ahead = schedule_health.ahead_of_clock(state, clock=clock)
    if ahead is not None:
        schedule_health.slot_ahead(state, ahead=ahead, now=clock)
        return TickReport()
    schedule_health.clock_caught_up(state, now=clock)
    try:
        report = fire_slots(schedule, state, now=now)
    except CODE_FAILURES as exc:  # its input's code (workflow code), or slots past the calendar
        if store.session_ended(exc):
            raise  # the session's end, not the schedule's: fire_due_schedules stops the tick
        schedule_health.tick_failed(state, error=described(exc), now=now, exc=exc)
        return TickReport(failed=[f"{schedule.workflow_name}/{schedule.name}"])
    if report.started or report.found:
        schedule_health.tick_succeeded(state, now=now)
    elif report.refused:
        # Said once for the schedule, not once a slot.
        schedule_health.tick_failed(state, now=now, error=(
            f"{len(report.refused)} slot(s) refused; the last, {report.refused[-1]}"))
    return report


def fire_slots(schedule: Schedule, state: ScheduleState, *, now: datetime) -> TickReport:
    """The tick of a schedule neither paused nor ahead of the clock: start its due slots'
    runs, record the last slot handled. A slot whose input raises is not recorded: the next
    tick tries it again."""
    report = TickReport()
    slots, report.skipped = due_slots(schedule, state, now=now)
    if report.skipped:
        # Left out by the declared policy, not lost: said, so that a day of missed slots
        # after an outage leaves a trace where the operator looks for it.
        logger.warning("schedule %s of %s: %d%s missed slot(s) after %s skipped (catch_up=%s)",
                       schedule.name, schedule.workflow_name, report.skipped,
                       " or more" if schedule.cron and report.skipped >= MAX_COUNTED_MISSED
                       else "",
                       state.last_slot_at.isoformat() if state.last_slot_at else "-",
                       schedule.catch_up)
    if not slots:
        if report.skipped or state.last_slot_at is None:
            # The latter: a row an earlier release left empty (no slot in the year before).
            record_progress(schedule, state, slot=handled_up_to(schedule, now), run_id=None,
                            now=now)
        return report
    last_run = last_slot = None
    for slot in slots:
        earlier = run_under_old_name(schedule, slot)
        if earlier is not None:
            report.found.append(earlier)
            last_run, last_slot = earlier, slot
            continue
        try:
            run, created = start_run(workflow=schedule.workflow_name,
                                     business_key=schedule.business_key(slot),
                                     input=schedule.input_for(slot),
                                     actor=Actor.system(f"schedule {schedule.name}"),
                                     guard=partial(refuse_if_paused, state))
        except PausedMeanwhile:
            # This slot and the later ones are the pause's: a resume goes on from its own
            # time, not from them.
            break
        except StartRefused as exc:
            # A refused slot stays refused whatever is tried again: move on.
            report.refused.append(f"{slot.isoformat()}: {exc}")
        else:
            (report.started if created else report.found).append(run.pk)
            last_run = run.pk
        last_slot = slot
    if last_slot is not None:
        record_progress(schedule, state, slot=last_slot, run_id=last_run, now=now)
    if last_run is not None:
        # A slot lost in a tick that otherwise worked: the schedule is not failing (every
        # slot refused is, and fire_schedule says so), so this is where it is said.
        for refusal in report.refused:
            logger.error("schedule %s of %s: start refused for slot %s", schedule.name,
                         schedule.workflow_name, refusal)
    return report


def refuse_if_paused(state: ScheduleState) -> None:
    """PausedMeanwhile if the schedule is paused now. start_run's guard: called in the
    transaction that creates a slot's run, it holds the schedule's row as set_paused locks
    it, so a pause either commits first (and no run is created) or waits until the run is
    committed. fire_schedule's earlier read of `paused` takes no lock: on its own it would
    let a pause committed since then be followed by one more run."""
    if ScheduleState.objects.select_for_update().values_list("paused", flat=True).get(
            pk=state.pk):
        raise PausedMeanwhile(f"schedule {state.name} of {state.workflow_name} was paused")


def set_paused(*, workflow: str, name: str, paused: bool, actor: Actor, reason: str,
               now: datetime | None = None) -> ScheduleState:
    """Pause or resume a schedule, recording who and why; the console and the CLI both come
    here (approvals.operator_actions). A resumed schedule does not run the slots it missed
    while paused: it goes on from the slot before now, its failing state cleared until a
    tick fails again."""
    schedule = registry.get(workflow, name)
    if schedule is None:
        raise ScheduleError(f"no schedule {name!r} on workflow {workflow!r}")
    if not reason or not reason.strip():
        raise ScheduleError("a reason is required to pause or resume a schedule")
    if (problem := person_text_problem(reason)) is not None:
        raise ScheduleError(f"the reason is {problem}")
    # Masked as a run action's reason is: a pasted credential is no better kept here.
    reason = redact_text(reason)
    now = now or store.current().now()
    state = state_of(schedule, now=now)
    with transaction.atomic():
        # The lock a tick holds while it creates a slot's run (refuse_if_paused): a pause
        # waits for a run being created, and no run is created after the pause commits.
        state = ScheduleState.objects.select_for_update().get(pk=state.pk)
        if state.paused == paused:
            raise ScheduleError(f"schedule {name!r} of {workflow} is already "
                                f"{'paused' if paused else 'running'}")
        state.paused = paused
        state.pause_reason = reason if paused else ""
        state.paused_by = actor.label if paused else ""
        # Paused, it keeps its trouble to show, left out of the metric (a paused schedule does
        # not run, so it does not alert); resumed, its next tick says again.
        forgotten = not paused and schedule_health.forget_trouble(state)
        if not paused:
            state.last_slot_at = handled_up_to(schedule, now)
        state.updated_at = now
        state.save()
        ControlRecord.objects.create(
            action="schedule_paused" if paused else "schedule_resumed", workflow_name=workflow,
            target=name, actor_label=actor.label, actor_user_id=actor.user_id, reason=reason,
            created_at=now)
    if forgotten:
        logger.info("schedule %s of %s resumed: its failing state is cleared until a tick "
                    "fails again", name, workflow)
    return state
