"""Every error under /api/ is JSON, whatever produced it and whatever DEBUG says.

The API's own operations answer errors through api.routes' exception handlers. A few
responses are made before or around them: Django's 404 for a path no operation matches (its
debug page when DEBUG is on), ninja's bare 405 for a method an operation does not take, and
the console's error pages. This middleware rewrites any such non-JSON error response into
the API's error shape, keeping its status and headers like Allow, so a client never parses
HTML and never sees a traceback.
"""

import json
from http import HTTPStatus

from django.conf import settings
from django.http import HttpResponse

API_PREFIX = "/api/"


def is_api_request(request) -> bool:
    """Whether the request is for the integration API (its paths are under /api/)."""
    return request.path.startswith(API_PREFIX)


def body_limit_text() -> str:
    """The request body limit (DATA_UPLOAD_MAX_MEMORY_SIZE) in words, for error messages."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return f"{limit} bytes ({limit / (1024 * 1024):.1f} MB)"


def error_code(status: int) -> str:
    """A stable error code for an HTTP status: 404 -> not_found, 413 -> request_too_large."""
    if status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE:
        return "request_too_large"
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


class JsonErrorsMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (not is_api_request(request) or response.status_code < 400
                or response.get("Content-Type", "").startswith("application/json")):
            return response
        status = response.status_code
        body = {"error": error_code(status), "detail": _detail(status)}
        replaced = HttpResponse(json.dumps(body), status=status,
                                content_type="application/json")
        for header in ("Allow", "Retry-After", "WWW-Authenticate"):
            if header in response:
                replaced[header] = response[header]
        return replaced


def _detail(status: int) -> str:
    if status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE:
        return f"the request body is larger than the limit of {body_limit_text()}"
    if status == HTTPStatus.METHOD_NOT_ALLOWED:
        return "this method is not allowed here (see the Allow header)"
    if status == HTTPStatus.NOT_FOUND:
        return "no API operation at this path; see /api/docs"
    if status >= 500:
        return "internal error; it has been logged"
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "error"
