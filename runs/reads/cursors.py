"""Times and page cursors given as text, read one way by every caller: the runs list's and
the attention list's cursors (console, API, command line), the moment a page was drawn, a
time typed at the command line. Text that names none is None here; each caller decides
whether that starts over (a page in the browser) or is refused (the API, a command)."""

import re
from datetime import UTC, datetime, timedelta

from django.utils.dateparse import parse_datetime


def parse_stamp(value: str) -> datetime | None:
    """The time `value` names, or None where it names none: parse_datetime raises for text
    shaped like a time that names no date (month 13) and returns None for the rest."""
    try:
        return parse_datetime(value)
    except ValueError:
        return None


# A (time, id) cursor as text: the time in microseconds since 1970 (UTC), a dot, the id.
# Every text of this shape is a place in the list (17 digits stay below the year 9999, 18
# below the largest bigint), so the API can document it exactly (KEYSET_PATTERN).
KEYSET_PATTERN = r"^[0-9]{1,17}\.[1-9][0-9]{0,17}$"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)


def encode_keyset(cursor: tuple[datetime, int] | None) -> str | None:
    """A (time, id) keyset cursor as the text a page hands out."""
    return f"{(cursor[0] - EPOCH) // MICROSECOND}.{cursor[1]}" if cursor else None


def decode_keyset(value: str) -> tuple[datetime, int] | None:
    """The (time, id) cursor `value` names, or None for text that is not one."""
    if not re.fullmatch(KEYSET_PATTERN, value):
        return None
    micros, _, pk = value.partition(".")
    return EPOCH + int(micros) * MICROSECOND, int(pk)
