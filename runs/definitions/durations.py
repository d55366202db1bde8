"""What a declared duration may be: a sleep's, a wait's timeout, an approval's reminder and
timeout (the rules of runs.definitions.validation, for the times a step declares)."""

from datetime import UTC, datetime, timedelta


def duration_problem(option: str, value, *, optional: bool = False) -> str | None:
    if (value is None and optional) or isinstance(value, timedelta) and value > timedelta(0):
        return None
    return f"{option} must be a positive timedelta, not {value!r}"


def dated_problem(option: str, value: timedelta) -> str | None:
    """Why a request cannot be given a time `value` after it opens, or None: an approval's
    due time and next reminder are its opening plus its timeout and its reminder interval.
    One past the year 9999 (timedelta.max, written for "never") cannot be computed: the
    request never opened, each sweep failed on it, and the run was at last held for a person
    with "OverflowError: date value out of range", naming neither the step nor the option."""
    try:
        datetime.now(UTC) + value
    except OverflowError:
        return (f"{option} {value} ends past the year 9999 counted from now, which no date "
                "holds; declare a shorter one")
    return None
