"""What each fault kind does to an HTTP exchange with a sandbox endpoint.

Every sandbox endpoint view is wrapped by `with_faults(endpoint)`, which consumes the
endpoint's next fault (demo.sandbox.faults) and plays it out:

- unavailable / rate_limit / forbidden / not_implemented: answer 503 / 429 (Retry-After: 1)
  / 403 / 501 at once; the endpoint does nothing.
- slow: wait SANDBOX_HOLD_SECONDS, then act and answer normally (a client with a shorter
  timeout gives up before anything happened, and the change lands after it left).
- commit_then_timeout: act (the change is committed: views run in autocommit), then hold the
  answer SANDBOX_HOLD_SECONDS, so that a client with a shorter timeout times out after the
  commit: the "timeout does not mean it failed" case.
- commit_then_reset: act, then send the status line, the headers (with the full
  Content-Length) and only the first half of the body, and close the connection. The client
  sees the connection drop mid-response (httpx.RemoteProtocolError).
- large_answer / oversized_answer: act, then answer with the JSON object padded (a field
  "padding") one byte past RUNS_RESULT_INLINE_BYTES / RUNS_RESULT_MAX_BYTES: a result the
  runtime keeps apart, and one it refuses although the change was made.
- malformed: left to the endpoint (only the model endpoint accepts it), which reads
  `request.sandbox_fault`.
"""

import functools
import inspect
import json
import logging
import time
from http.server import BaseHTTPRequestHandler

from django.conf import settings
from django.http import HttpResponse, JsonResponse

from . import faults

logger = logging.getLogger(__name__)

_REFUSALS = {
    faults.UNAVAILABLE: (503, "service unavailable (injected fault); nothing was changed"),
    faults.RATE_LIMIT: (429, "rate limit exceeded (injected fault); nothing was changed"),
    faults.FORBIDDEN: (403, "forbidden (injected fault); nothing was changed"),
    faults.NOT_IMPLEMENTED: (501, "not implemented (injected fault); nothing was changed"),
}


def with_faults(endpoint: str):
    """Wrap a sandbox endpoint view so that the endpoint's queued faults apply to it."""
    if endpoint not in faults.ENDPOINTS:
        raise ValueError(f"unknown sandbox endpoint {endpoint!r}")

    def decorator(view):
        @functools.wraps(view)
        def wrapper(request, *args, **kwargs):
            kind = faults.consume(endpoint)
            request.sandbox_fault = kind
            if kind is None:
                return view(request, *args, **kwargs)
            logger.info("sandbox: injecting fault %s on %s", kind, endpoint)
            if kind in _REFUSALS:
                status, message = _REFUSALS[kind]
                response = JsonResponse({"error": message, "fault": kind}, status=status)
                if kind == faults.RATE_LIMIT:
                    response["Retry-After"] = "1"
                return response
            if kind == faults.SLOW:
                time.sleep(settings.SANDBOX_HOLD_SECONDS)
            response = view(request, *args, **kwargs)
            if kind == faults.COMMIT_THEN_TIMEOUT:
                time.sleep(settings.SANDBOX_HOLD_SECONDS)
            elif kind == faults.COMMIT_THEN_RESET:
                response = _cut_off(response)
            elif kind in _PADDED_PAST:
                response = _padded(response, int(getattr(settings, _PADDED_PAST[kind])))
            return response

        return wrapper

    return decorator


# The runtime's limit (a setting) each padding fault answers past.
_PADDED_PAST = {faults.LARGE_ANSWER: "RUNS_RESULT_INLINE_BYTES",
                faults.OVERSIZED_ANSWER: "RUNS_RESULT_MAX_BYTES"}


def _padded(response: HttpResponse, past: int) -> HttpResponse:
    """The JSON object answered, with a field "padding" that makes it larger than `past`
    bytes; any other answer as it is."""
    try:
        body = json.loads(response.content)
    except ValueError:
        return response
    if not isinstance(body, dict):
        return response
    return JsonResponse({**body, "padding": "x" * (past + 1)}, status=response.status_code)


def _cut_off(response: HttpResponse) -> HttpResponse:
    """A response that promises the whole body (Content-Length) but carries half of it, on a
    connection the server closes right after sending it.

    A WSGI application cannot close its connection: wsgiref (under `runserver` and the test
    live server) refuses a `Connection: close` set by the application, as a hop-by-hop
    header. Its request handler does honour its documented `close_connection` attribute,
    so we find the handler serving this request on the call stack and set it. Under a server
    without one (gunicorn, uwsgi) the connection stays open and the client, still waiting
    for the rest of the body, times out instead: the same unknown outcome, reached slower.
    """
    body = response.content
    cut = HttpResponse(body[: len(body) // 2], status=response.status_code,
                       content_type=response.get("Content-Type"))
    cut["Content-Length"] = str(len(body))
    handler = _serving_request_handler()
    if handler is not None:
        handler.close_connection = True
    else:
        logger.warning("sandbox: commit_then_reset cannot close the connection under this "
                       "server; the client will time out instead")
    return cut


def _serving_request_handler() -> BaseHTTPRequestHandler | None:
    frame = inspect.currentframe()
    try:
        while frame is not None:
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, BaseHTTPRequestHandler):
                return candidate
            frame = frame.f_back
        return None
    finally:
        del frame
