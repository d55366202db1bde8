"""What a sleep and an event wait may declare, checked when they are declared (the rules of
runs.definitions.validation, for the steps that wait on the world)."""

import json

from pydantic import BaseModel, ValidationError

from .durations import duration_problem
from .validation import is_model, name_problem, refuse, where


def payload_taken(schema: type[BaseModel], payload) -> dict:
    """`payload` as an event wait's `schema` takes it (its JSON form), or pydantic's
    ValidationError: the one check of what a wait's step stores as its result, an event's
    payload on delivery (runs.waiting.payloads) and its default when declared."""
    return schema.model_validate(payload).model_dump(mode="json")


def check_sleep(workflow, name, *, duration, until) -> None:
    """Refuse a sleep not given exactly one of `duration` (a positive timedelta: 5 seconds
    given as 5 failed on a comparison naming neither step nor option) and `until`."""
    problem = "give either duration or until" if (duration is None) == (until is None) else None
    refuse(where(workflow, name), problem or duration_problem("duration", duration, optional=True))


def check_event_wait(workflow, name, *, event, timeout, on_timeout: str,
                     policies: tuple[str, ...], default=None, schema=None) -> None:
    """Refuse an event wait's event name, timeout policy (one other than "escalate", the
    wait's own, only with a timeout), timeout (a positive timedelta) and default, which a
    "continue" timeout stores as the step's result: one JSON cannot hold (a Decimal, a
    datetime, a model instance, NaN) failed the worker at every claim once the wait timed
    out, and the run stayed waiting past its deadline; one its schema refuses was stored all
    the same, and the steps after it read a result no event could have brought. A default of
    None (the step's result null: no event came) is no payload and is not checked."""
    problem = None
    if not isinstance(event, str) or not event.strip():
        problem = f"name the event it waits for (event=\"invoice.paid\"), not {event!r}"
    elif (named := name_problem(event)) is not None:
        # An event is sent under this name and kept in a column as long as a step's name
        # (ExternalEvent.event_name): the door refused every event named past it, or with a
        # control character, so the wait was never woken, and a name past the waiting
        # step's reference failed every claim of its run in the database.
        problem = f"the event's {named.removeprefix('its ')}"
    elif ":" in event:
        # The waiting step names what it waits for as "awaiting-event:<event>:<key>": a ':'
        # in the event would be read as the start of the key.
        problem = (f"the event's name {event!r} may not contain ':' (use '.' or '-' to "
                   "separate its parts)")
    elif on_timeout not in policies:
        problem = f"on_timeout must be one of {', '.join(policies)}, not {on_timeout!r}"
    elif timeout is None and on_timeout != "escalate":
        # No timeout, no deadline (runs.machine.transitions.events): the policy would never
        # apply, and a run meant to fail or go on with its default would wait for ever.
        problem = (f"on_timeout={on_timeout!r} applies when its timeout passes, and no "
                   "timeout is declared: declare timeout=timedelta(...), or leave on_timeout "
                   "unset to wait for the event")
    else:
        try:
            json.dumps(default, allow_nan=False)
        except (TypeError, ValueError, RecursionError) as exc:
            problem = (f"its default must be JSON (dicts, lists, text, finite numbers, true, "
                       f"false, null), as the step's result is stored: {exc}")
        else:
            problem = default_problem(schema, default)
    refuse(where(workflow, name), problem or duration_problem("timeout", timeout, optional=True))


def default_problem(schema, default) -> str | None:
    """Why `schema` refuses `default` as it would an event's payload, or None. A schema that
    is not a model is refused by the step's own checks (validation.check_step)."""
    if default is None or not is_model(schema):
        return None
    try:
        payload_taken(schema, default)
    except ValidationError as exc:
        first = exc.errors()[0]
        where_in = ".".join(map(str, first["loc"])) or "the default"
        said = " ".join(str(first["msg"]).split())
        return (f"its default does not match its schema {schema.__name__}, as an event's "
                f"payload must: {where_in}: {said}")
    return None
