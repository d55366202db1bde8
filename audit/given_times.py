"""A time given from outside (a link, a form, an admin list's address, a command) as every
door reads it before the database is asked about it. Kept in the lowest layer so that the
admin lists (audit.admin) and the console's forms and cursors (runs.reads.cursors) hold it
once.

Python takes a time whose UTC value lies outside its calendar (9999-12-31T23:59:59-23:59 is
in the year 10000 there) and any offset under 24 hours; SQLite's adapter converts every time
to UTC (an OverflowError, a server error on the demo), and PostgreSQL takes no offset past
15:59 (a DataError, a server error on any other database)."""

from datetime import UTC, datetime, timedelta

# The widest UTC offset PostgreSQL takes in a time it is given.
WIDEST_OFFSET = timedelta(hours=15, minutes=59)


def calendar_problem(when: datetime) -> str | None:
    """Why the aware time `when` is no time, or None: its UTC value lies outside the years 1
    to 9999. A naive time is the caller's to read (a form reads it in the current time zone)
    or refuse."""
    if when.utcoffset() is None:
        return None
    try:
        when.astimezone(UTC)
    except OverflowError:
        side = "after the year 9999" if when.year > 1 else "before the year 1"
        return f"{when.isoformat()} is {side} in UTC"
    return None


def given_time(when: datetime) -> datetime:
    """The aware time `when`, in the calendar (calendar_problem), as the database is asked
    about it: in UTC, so that any offset Python takes is one PostgreSQL takes."""
    return when.astimezone(UTC)


def askable_as_given(when: datetime) -> bool:
    """Whether the database can be asked about `when` as it is written, without given_time
    (a filter handed to the database as its text, as Django admin's are): in the calendar,
    with an offset PostgreSQL takes."""
    offset = when.utcoffset()
    return offset is None or (calendar_problem(when) is None and abs(offset) <= WIDEST_OFFSET)
