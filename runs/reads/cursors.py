"""Times and page cursors given as text, read one way by every caller: the runs list's and
the attention list's cursors (console, API, command line), the moment a page was drawn, a
time typed at the command line. Text that names none is None here; each caller decides
whether that starts over (a page in the browser) or is refused (the API, a command)."""

import re
from datetime import UTC, datetime, timedelta

from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime

from audit.given_times import calendar_problem, given_time


def parse_stamp(value: str) -> datetime | None:
    """The time `value` names, in UTC (given_time), or None where it names none: text that
    is no time (parse_datetime raises for one shaped like a time that names no date, month
    13, and returns None for the rest), a time without its UTC offset, which names no instant
    (every time a page or the API hands out carries one; a command refuses one without), and
    a time outside the calendar (audit.given_times.calendar_problem)."""
    try:
        when = parse_datetime(value)
    except ValueError:
        return None
    if when is None or when.utcoffset() is None or calendar_problem(when) is not None:
        return None
    return given_time(when)


# A (time, id) cursor as text: the time in microseconds since 1970 (UTC), a dot, the id.
# Every text of this shape is a place in the list (17 digits stay below the year 9999, 18
# below the largest bigint), so the API can document it exactly (KEYSET_PATTERN). A list
# ordered by more than one time (the approvals inbox: due, then asked) writes each of its
# times the same way, a dot after each, the id last (keyset_pattern(2)).
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def keyset_pattern(times: int = 1) -> str:
    """The shape of a cursor of `times` times and an id, for the API's document."""
    return "^" + r"[0-9]{1,17}\." * times + r"[1-9][0-9]{0,17}$"


KEYSET_PATTERN = keyset_pattern(1)


def encode_keyset(cursor: tuple | None) -> str | None:
    """A keyset cursor (its times, then an id: (time, id) for the runs list) as the text a
    page hands out."""
    if not cursor:
        return None
    *times, pk = cursor
    return ".".join([*(str((t - EPOCH) // MICROSECOND) for t in times), str(pk)])


def decode_keyset(value: str, *, times: int = 1) -> tuple | None:
    """The cursor of `times` times and an id that `value` names, or None for text that is
    not one (of another number of times included: one list's cursor is no place in
    another)."""
    if not re.fullmatch(keyset_pattern(times), value):
        return None
    *stamps, pk = value.split(".")
    return (*(EPOCH + int(micros) * MICROSECOND for micros in stamps), int(pk))


def keyset_after(rows: QuerySet, columns: tuple[str, ...], cursor: tuple, *,
                 descending: bool = False) -> QuerySet:
    """`rows` past the row whose `columns` hold `cursor`, in their order (each descending
    with `descending`): for columns (a, b, c), a beyond, or a equal and b beyond, or a and b
    equal and c beyond. Every keyset page of the project reads its next page so."""
    beyond = "lt" if descending else "gt"
    condition = Q()
    for i, column in enumerate(columns):
        equal = {c: v for c, v in zip(columns[:i], cursor[:i], strict=True)}
        condition |= Q(**equal, **{f"{column}__{beyond}": cursor[i]})
    # Implied by the condition, but PostgreSQL takes only this form as where to start
    # reading the index: without it, page N would walk the N-1 pages before it.
    return rows.filter(condition, **{f"{columns[0]}__{beyond}e": cursor[0]})
