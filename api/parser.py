"""How the integration API reads a request body: JSON, and only when its Content-Type says
JSON.

Ninja asks the API's parser for the body of every operation that takes one, and of no
other, so the rule lives here once for every route. A body labelled otherwise is refused,
not guessed at: the document promises application/json; a client sending a form or text
has a bug a 415 names; and a proxy that inspects bodies by their Content-Type would see
something other than what the API acts on.
"""

import json

from ninja.parser import Parser

JSON = "application/json"


class UnsupportedMediaType(Exception):
    """A request body sent with a Content-Type other than application/json (415)."""

    def __init__(self, received: str):
        sent = f"as {received}" if received else "without a Content-Type"
        super().__init__(f"the request body was sent {sent}; send it as {JSON}")


class JsonParser(Parser):
    """JSON bodies, refusing other media types, and NaN and Infinity (not JSON, and not
    storable in jsonb)."""

    def parse_body(self, request):
        # Django lower-cases the media type and sets its parameters (charset=utf-8) apart.
        if request.content_type != JSON:
            raise UnsupportedMediaType(request.content_type)
        return json.loads(request.body, parse_constant=_refuse_constant)


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")
