"""Times and page cursors given as text, read one way by every caller: the runs list's and
the attention list's cursors (console, API, command line), the moment a page was drawn, a
time typed at the command line. Text that names none is None here; each caller decides
whether that starts over (a page in the browser) or is refused (the API, a command)."""

from datetime import datetime

from django.utils.dateparse import parse_datetime

# The largest id a bigint column holds: a larger one fails the query, not just the match.
LARGEST_ID = 2**63 - 1


def parse_stamp(value: str) -> datetime | None:
    """The time `value` names, or None where it names none: parse_datetime raises for text
    shaped like a time that names no date (month 13) and returns None for the rest."""
    try:
        return parse_datetime(value)
    except ValueError:
        return None


def encode_keyset(cursor: tuple[datetime, int] | None) -> str | None:
    """A (time, id) keyset cursor as the text a page hands out ("time|id")."""
    return f"{cursor[0].isoformat()}|{cursor[1]}" if cursor else None


def decode_keyset(value: str) -> tuple[datetime, int] | None:
    """The (time, id) cursor a page handed out, or None for text that is not one."""
    stamp, _, pk = value.rpartition("|")
    when = parse_stamp(stamp) if stamp else None
    if when is None or not (pk.isascii() and pk.isdigit()) or not 0 < int(pk) <= LARGEST_ID:
        return None
    return when, int(pk)
