"""The time a scheduler tick is given (runs.waiting.schedules: fire_due_schedules,
fire_schedule): the instant it is, refused when it cannot be a tick's."""

from datetime import UTC, datetime, timedelta

from .. import store
from . import schedule_health
from .schedule_errors import ScheduleError

# How far back a replayed tick may go: as far as a cron slot is looked for.
TICK_REPLAY_LIMIT = timedelta(days=366)


def tick_instant(now: datetime) -> datetime:
    """The tick time `now` as the instant it is, in UTC; refused without a UTC offset. A
    slot is an aware datetime in its schedule's zone, and two datetimes of one zone compare
    and subtract by the wall clock, blind to which of the two 02:30s of the night summer
    time ends each is: a tick time given in the schedule's zone started the second hour's
    slots during the first. Against UTC they compare as instants."""
    refuse_naive(now)
    try:
        return now.astimezone(UTC)
    except OverflowError:  # 0001-01-01 ahead of UTC: before any slot there can be
        raise ScheduleError(f"tick time {now.isoformat()} is before the first instant a "
                            "schedule can have") from None


def refuse_naive(now: datetime) -> None:
    if now.tzinfo is None:
        raise ScheduleError(f"tick time {now.isoformat()} has no UTC offset")


def check_tick_time(now: datetime) -> None:
    """Refuse a tick time ahead of the database clock: its slots would be recorded as handled
    before they are due, and the schedule would start nothing until the clock got there.
    Compared as aware datetimes, not converted: a time of year 1 ahead of UTC has no UTC
    instant to convert to, and is refused as too far back like any other."""
    refuse_naive(now)
    clock = store.current().now()
    if now < clock - TICK_REPLAY_LIMIT:
        raise ScheduleError(f"tick time {now.isoformat()} is more than "
                            f"{TICK_REPLAY_LIMIT.days} days before the database clock "
                            f"({clock.isoformat(timespec='seconds')}): a tick replays the "
                            "last year at most")
    if now > clock + schedule_health.TICK_AHEAD_ALLOWANCE:
        raise ScheduleError(f"tick time {now.isoformat()} is ahead of the database clock "
                            f"({clock.isoformat(timespec='seconds')}): a tick may replay "
                            "the past, never run ahead of the clock")
