"""A cron's slots in a time zone that changes its clocks, by one rule whatever the number of
fields (runs.waiting.schedules: Schedule.slots_after).

cronsim follows Debian cron for an expression of five fields whose minute and hour are fixed
(neither begins with "*"): a slot at a time the clock skips (02:30 the night summer time
begins) runs at the first minute after the gap, and one at a time that happens twice runs at
the first. It leaves an expression of six fields (seconds first) to the clock, so a daily
"0 30 2 * * *" ran never on the first of those nights and twice on the second. Here such an
expression has the five-field rule too; one whose minute or hour begins with "*" runs by the
clock in either form (in both hours of the night summer time ends, at no time the clock
skips), as cron runs it.
"""

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from cronsim import CronSim


def slots_after(expression: str, start: datetime) -> Iterator[datetime]:
    """The slots of `expression` strictly after `start` (aware, in the schedule's zone)."""
    fields = expression.split()
    if len(fields) != 6 or fields[1].startswith("*") or fields[2].startswith("*"):
        yield from CronSim(expression, start)
        return
    zone, after, previous = start.tzinfo, start.astimezone(UTC), None
    # The wall clock's times, each read at its first occurrence, or, skipped by the clock,
    # moved on a minute at a time to the first after the gap (as cronsim moves them).
    for wall in CronSim(expression, start.replace(tzinfo=None, fold=0)):
        slot = wall.replace(tzinfo=zone, fold=0)
        while _imaginary(slot):
            wall += timedelta(minutes=1)
            slot = wall.replace(tzinfo=zone, fold=0)
        # In UTC: datetimes of one zone compare by the wall clock, blind to which of two
        # 02:30s each is.
        if slot.astimezone(UTC) > after and slot != previous:
            previous = slot
            yield slot


def _imaginary(moment: datetime) -> bool:
    return moment.replace(fold=0) != moment.astimezone(UTC).astimezone(moment.tzinfo)

