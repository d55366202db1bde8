"""How the integration API reads a request: its JSON body, and only when its Content-Type
says JSON; and its query string, only the parameters an operation knows.

Ninja asks the API's parser for the body of every operation that takes one, and of no
other, so the rule lives here once for every route. A body labelled otherwise is refused,
not guessed at: the document promises application/json; a client sending a form or text
has a bug a 415 names; and a proxy that inspects bodies by their Content-Type would see
something other than what the API acts on.
"""

import json
import math

from ninja import Status
from ninja.parser import Parser

from audit.quoting import quoted
from runs.machine.storable import NotFinite, TooManyDigits, finite_json

JSON = "application/json"
# A body of nothing but non-finite numbers could otherwise be answered with an error per
# number: hundreds of thousands within the body limit.
MAX_NAMED_NUMBERS = 50


class UnsupportedMediaType(Exception):
    """A request body sent with a Content-Type other than application/json (415)."""

    def __init__(self, received: str):
        sent = f"as {received}" if received else "without a Content-Type"
        super().__init__(f"the request body was sent {sent}; send it as {JSON}")


class NonFiniteNumber(Exception):
    """A body holding NaN, Infinity or a number too large for a float (1e400): 422, each
    named by where it is in the body, as a field that does not match its schema."""

    def __init__(self, locations: list[list]):
        self.errors = [{"loc": loc, "msg": "Input should be a finite number",
                        "type": "finite_number"} for loc in locations[:MAX_NAMED_NUMBERS]]
        named = ", ".join(".".join(map(str, loc)) for loc in locations[:MAX_NAMED_NUMBERS])
        more = len(locations) - MAX_NAMED_NUMBERS
        super().__init__(f"numbers must be finite (JSON has no NaN or Infinity, and one "
                         f"too large for a float would be read as infinity): {named}"
                         + (f" and {more} more" if more > 0 else ""))


class MalformedJson(Exception):
    """A body sent as JSON that cannot be read as JSON (400), saying what is wrong and
    where, where ninja alone would answer only that the body could not be parsed."""


class DuplicateKey(ValueError):
    """An object in the body naming one key twice (400). json.loads keeps the last and says
    nothing, where another reader of the same body (a proxy, a log, a signature check) may
    keep the first: the API would then act on a body other than the one they saw."""

    def __init__(self, key: str):
        super().__init__(f"the request body has the key {quoted(key)} more than once in one "
                         "object; send each key once")


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    data = dict(pairs)
    if len(data) != len(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return data


def _unreadable(exc: Exception) -> str:
    if isinstance(exc, DuplicateKey):
        return str(exc)
    if isinstance(exc, json.JSONDecodeError):
        return (f"the request body is not valid JSON: {exc.msg} at line {exc.lineno}, "
                f"column {exc.colno}")
    if isinstance(exc, UnicodeDecodeError):
        return ("the request body is not valid JSON: its bytes are not UTF-8 (byte "
                f"{exc.start}: {exc.reason})")
    if isinstance(exc, RecursionError):
        return "the request body nests objects or lists too deeply to be read"
    if isinstance(exc, TooManyDigits):
        # Python's guard against quadratic-time parsing, worded for the client.
        return (f"the request body holds an integer of more than {exc.limit} digits; no "
                "field takes one")
    return "the request body is not valid JSON"


class JsonParser(Parser):
    """JSON bodies, refusing other media types, an object naming a key twice (at any depth),
    and numbers that are not finite: NaN and Infinity are not JSON, and neither they nor an
    overflowing literal (1e400, read as infinity) can be stored in jsonb or compared as a
    number."""

    def parse_body(self, request):
        # Django lower-cases the media type and sets its parameters (charset=utf-8) apart.
        if request.content_type != JSON:
            raise UnsupportedMediaType(request.content_type)
        try:
            return finite_json(request.body, object_pairs_hook=_unique_keys)
        except NotFinite as exc:
            raise NonFiniteNumber(_non_finite_locations(exc.data)) from None
        except (ValueError, RecursionError) as exc:
            # JSONDecodeError, UnicodeDecodeError and DuplicateKey are ValueErrors too.
            raise MalformedJson(_unreadable(exc)) from None


def _non_finite_locations(data) -> list[list]:
    # Iterative: json.loads nests as deep as the recursion limit allows, and a recursive walk
    # called from inside a request would pass it.
    found, pending = [], [(data, [])]
    while pending:
        value, loc = pending.pop()
        if isinstance(value, float) and not math.isfinite(value):
            found.append(loc or ["body"])
        elif isinstance(value, dict):
            pending.extend(reversed([(item, [*loc, key]) for key, item in value.items()]))
        elif isinstance(value, list):
            pending.extend(reversed([(item, [*loc, i]) for i, item in enumerate(value)]))
    return found


def refuse_unknown_query(request, known: tuple[str, ...]) -> Status | None:
    """A 422 naming the query parameters the operation does not know, and those sent more
    than once, or None: a misspelt parameter would otherwise be ignored silently (a filter
    widening a list, an option not applied), and of a repeated one only the last would count
    (?status=attention&status=queued lists the queued runs alone)."""
    unknown = [name for name in request.GET if name not in known]
    repeated = [name for name in request.GET
                if name in known and len(request.GET.getlist(name)) > 1]
    if not unknown and not repeated:
        return None
    said = []
    if unknown:
        said.append(f"unknown query parameter(s): {', '.join(map(repr, unknown))}; "
                    f"known: {', '.join(known) or 'none'}")
    if repeated:
        said.append(f"query parameter(s) sent more than once: "
                    f"{', '.join(map(repr, repeated))}; send each at most once")
    return Status(422, {"error": "invalid_request", "detail": "; ".join(said),
                        "errors": [{"loc": ["query", name], "msg": "unknown parameter",
                                    "type": "extra_forbidden"} for name in unknown]
                        + [{"loc": ["query", name], "msg": "sent more than once",
                            "type": "repeated"} for name in repeated]})
