"""The product's own error pages, used by console.urls as Django's handler400/403/404/500.

Django has no handler413. A body over DATA_UPLOAD_MAX_MEMORY_SIZE raises RequestDataTooBig
wherever the body is first read (often CsrfViewMiddleware reading request.POST), and Django
turns that, a SuspiciousOperation, into a call of handler400 with the exception. No
middleware can catch it first (each layer already converts exceptions into responses), so
bad_request is where a too-large body becomes a 413 page. The API answers its own errors as
JSON (api.routes, api.middleware).
"""

import sys

from django.core.exceptions import RequestDataTooBig
from django.db import connection
from django.http import HttpResponse, HttpResponseServerError
from django.shortcuts import render
from django.template import loader
from django.views.decorators.csrf import requires_csrf_token

from api.errors import DATABASE_DOWN, RETRY_AFTER_SECONDS
from api.middleware import body_limit_text
from runs.execution.database_outage import (
    commit_under_way,
    connection_trouble_text,
    connections_full,
    connections_full_detail,
    refuses_writes,
    refuses_writes_text,
    would_not_wait,
)
from runs.execution.lost_commit import COMMITTED, NOT_COMMITTED, commit_outcome

from .sessions import session_save_under_way


@requires_csrf_token
def bad_request(request, exception=None):
    """400, or 413 when the body was over the upload limit."""
    if isinstance(exception, RequestDataTooBig):
        return request_too_large(request, exception)
    return render(request, "400.html", status=400)


@requires_csrf_token
def request_too_large(request, exception=None):
    """413: the body was over DATA_UPLOAD_MAX_MEMORY_SIZE; the page names the limit."""
    return render(request, "413.html", {"limit": body_limit_text()}, status=413)


@requires_csrf_token
def permission_denied(request, exception=None):
    """403 with the refusal's own message (the views write it for the person refused)."""
    message = str(exception) if exception is not None and exception.args else ""
    return render(request, "403.html", {"message": message}, status=403)


@requires_csrf_token
def page_not_found(request, exception=None):
    """404. The exception is not shown: for an unknown URL it lists the URL patterns."""
    return render(request, "404.html", {"request_path": request.path}, status=404)


def outage_line(exc: BaseException | None) -> str | None:
    """What the log says, in one line, of a request server_error answers 503 for the
    database (console.request_log), or None for one it answers 500."""
    if refuses_writes(exc):
        return refuses_writes_text(exc)
    if isinstance(exc, DATABASE_DOWN):
        return connections_full_detail(exc) if connections_full(exc) \
            else connection_trouble_text(exc)
    return None


def server_error(request):
    """500, rendered without the request's context: whatever failed (the database, the
    session) must not be needed to draw the page that says so; 503 when the database did
    not answer, or would not wait for what the request needed, or went as the request's
    change was committed or its session saved (then it may have been done, and the page
    says so, or, for the change, what the database answered of it afterwards: done, or
    not done), or refused the change (read-only)."""
    exc = sys.exc_info()[1]
    if refuses_writes(exc):
        # A new session for the next request (runs.execution.database_outage.beat_pass).
        connection.close()
        # The database reads but refuses every change (read-only, a standby): not the
        # console's fault, and not a database away either; pages that only read still work.
        page = loader.get_template("503.html").render(
            {"read_only": True, "session_unsaved": session_save_under_way(exc)})
        response = HttpResponse(page, status=503)
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    if isinstance(exc, DATABASE_DOWN):
        # The session is saved after the view's work: that work may have been done.
        unsaved = session_save_under_way(exc)
        busy = would_not_wait(exc) and not unsaved
        # A change's commit that lost its connection: what the database says of it when
        # asked afterwards (runs.execution.lost_commit), where that can be told.
        outcome = commit_outcome(exc) if commit_under_way(exc) and not unsaved and \
            not busy else None
        page = loader.get_template("503.html").render(
            {"busy": busy, "session_unsaved": unsaved,
             "done": outcome == COMMITTED, "not_done": outcome == NOT_COMMITTED,
             "maybe_done": outcome is not None, "full": connections_full(exc)})
        response = HttpResponse(page, status=503)
        if outcome != COMMITTED:  # done: nothing to try again
            response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response
    return HttpResponseServerError(loader.get_template("500.html").render())
