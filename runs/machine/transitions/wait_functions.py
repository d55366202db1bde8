"""What a wait's functions of the run's input give (a sleep's `until`, an event wait's
`correlate`), called and checked by one rule wherever they are called: when a run is
started (start.refuse_waits_the_input_fails: the start is refused, naming the step, and
nothing is written) and when the run reaches the wait (timers.sleeps, events.awaits: the
step fails for a person, naming it). A problem that depends only on the input (a key it
lacks, a datetime without a time zone) is so told to whoever starts the run, not found weeks
later when the run reaches the wait; one the code gives only later (a release changed it
under running runs) is still caught there.

Both functions take the input alone (runs.definitions.validation.input_function_check holds
them to fn(input)), so what they give at the start is what they give at the wait, but for
the code and the clock."""

from datetime import UTC, datetime

from ...definitions import definition
from ...models import ExternalEvent
from ..errors import CODE_FAILURES, described, raise_if_process_stopping
from ..storable import identifier_problem, text_problem


class WaitFunctionFailed(Exception):
    """A wait's function of the input raised, or gave what the wait cannot use. The message
    says which function and what: "its correlate(input) raised KeyError: 'po_number'"."""


class TimeNotKept(Exception):
    """A wake time the database cannot hold and give back: PostgreSQL keeps a time after
    year 9999 (UTC), but psycopg cannot read it, so every later read of the run would fail
    and the sweeper would never wake it."""


def kept(when: datetime) -> datetime:
    """`when`, if the database can hold it and give it back: Python reads it in UTC, so it
    must fall in years 1 to 9999 there (9999-12-31 23:00-05:00 does not)."""
    try:
        when.astimezone(UTC)
    except OverflowError:
        raise TimeNotKept(f"{when.isoformat()} is {'after' if when.year > 1 else 'before'} "
                          "what the database can keep (years 1 to 9999, UTC)") from None
    return when


def _called(fn, option: str, data: dict):
    try:
        return fn(data)
    except CODE_FAILURES as exc:  # the workflow's code, whatever it raises
        raise_if_process_stopping(exc)
        raise WaitFunctionFailed(f"its {option}(input) raised {described(exc)}") from exc


def _given(value) -> str:
    """What a function gave, in a refusal: its type, and the value itself where it is short
    enough to read (the author's own input, or what their code made of it)."""
    if value is None:
        return "None"
    name = type(value).__name__
    article = "an" if name[0] in "aeiouAEIOU" else "a"
    kind = "text" if isinstance(value, str) else f"{article} {name}"
    try:
        shown = repr(value)
    except CODE_FAILURES as exc:  # a value whose repr raises is named by its type alone
        raise_if_process_stopping(exc)
        return kind
    return f"{kind} ({shown})" if len(shown) <= 100 else kind


def until_time(spec: definition.StepDef, data: dict) -> datetime:
    """What sleep `spec`'s until(data) gives: an aware datetime the database can keep.
    WaitFunctionFailed if until raised or gave anything else; TimeNotKept if it gave a time
    the database cannot keep."""
    until = _called(spec.sleep_until, "until", data)
    if not isinstance(until, datetime):
        raise WaitFunctionFailed(f"its until(input) returned {_given(until)}, not an aware "
                                 "datetime")
    try:
        offset = until.utcoffset()
    except CODE_FAILURES as exc:  # its tzinfo is the workflow's code too
        raise_if_process_stopping(exc)
        raise WaitFunctionFailed("its until(input) returned a datetime whose time zone "
                                 f"raised {described(exc)}") from exc
    # A tzinfo whose utcoffset() is None leaves the time as naive as no tzinfo at all.
    if offset is None:
        raise WaitFunctionFailed(
            f"its until(input) returned a datetime without a time zone "
            f"({until.replace(tzinfo=None).isoformat()}): declare the input field as "
            "AwareDatetime or give it a zone")
    return kept(until)


# The longest correlation key an event may carry (its column; the door, runs.waiting.events,
# refuses a longer one).
KEY_LENGTH = ExternalEvent._meta.get_field("correlation_key").max_length


def key_problem(key: str) -> str | None:
    """Why no event could carry `key` to a wait, or None. A wait under a key the door refuses
    (empty, too long, text the database cannot store, blank or holding a control character:
    identifier_problem) would wait for an event no sender can deliver, and a NUL would fail
    the checkpoint of every worker in turn."""
    if not key:
        return "it is empty"
    if len(key) > KEY_LENGTH:
        return f"it is {len(key)} characters long, an event's at most {KEY_LENGTH}"
    return text_problem(key) or identifier_problem(key)


def correlation_key(spec: definition.StepDef, data: dict, business_key: str) -> str:
    """The key an event for wait `spec` carries: its correlate(data), or the run's business
    key where it declares none. WaitFunctionFailed if correlate raised, or gave what is not
    text (str() would make of a None, which a missing field gives, the key "None", shared by
    every run whose field is missing) or a key no event could carry (key_problem)."""
    if spec.correlate is None:
        key, whose = business_key, "the run's business key is"
    else:
        key, whose = _called(spec.correlate, "correlate", data), "its correlate(input) returned"
        if not isinstance(key, str):
            raise WaitFunctionFailed(f"its correlate(input) returned {_given(key)}, not the "
                                     "correlation key as text")
    if (problem := key_problem(key)) is not None:
        raise WaitFunctionFailed(f"{whose} a key no event can carry: {problem}")
    return key
