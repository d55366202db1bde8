"""A duration as people read it in a message (a recovery contract's stop condition, an
approval's timeout, how long a link works): "36 hours", not "1 day, 12:00:00" nor "1.5
days"."""

from datetime import timedelta

# (unit, its length in seconds, the least duration said in it).
DURATION_UNITS = (("day", 86400, 2 * 86400), ("hour", 3600, 3600), ("minute", 60, 60))


def duration_text(delta: timedelta) -> str:
    """`delta` to a tenth of its unit: days from two days ("3 days", "4.5 days"), hours under
    that ("1 hour", "36 hours"), minutes or seconds under an hour or a minute."""
    seconds = delta.total_seconds()
    unit, size = next(((unit, size) for unit, size, least in DURATION_UNITS
                       if seconds >= least), ("second", 1))
    number = f"{seconds / size:.1f}".removesuffix(".0")
    return f"{number} {unit}{'' if number == '1' else 's'}"
