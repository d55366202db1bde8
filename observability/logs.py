"""Structured logs: one JSON object per line, carrying the run a line is about.

The fields of the run in hand (run id, workflow, business key, step, idempotency key, who
acts) live in a context variable, bound with `log_context(...)` around the work; a filter on
the handler copies them onto every record, whichever logger wrote it (the runtime's, httpx's,
Celery's), so no call site has to pass `extra=`. Context variables follow threads and asyncio
tasks correctly, which thread-locals would not under an async server.

This module imports nothing from Django or the apps, so LOGGING can name it before the apps
are loaded, and the runtime can import it without a dependency cycle.
"""

import json
import logging
from datetime import UTC, datetime

from audit.redaction import redact_text
from runs.machine.logcontext import CONTEXT_FIELDS, bind, current, log_context, log_fields, unbind

__all__ = ["CONTEXT_FIELDS", "ContextFilter", "JsonFormatter", "LinkTokenFilter",
           "PlainFormatter", "bind", "current", "log_context", "unbind"]

class ContextFilter(logging.Filter):
    """Copies the bound context onto each record (a value passed with `extra=` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for key, value in log_fields().items():
            if not hasattr(record, key):
                setattr(record, key, value)
        return True


class LinkTokenFilter(logging.Filter):
    """Masks approval link tokens (redact_text) in the records of the loggers that write
    request paths: Django logs the path of each 4xx answer (django.request: "Gone:
    /approvals/5/link/<token>/"), the development server every request (django.server), and
    a token decides a request (a live one pasted under another request's id is answered 400).
    Set on those loggers only: formatting every record twice would cost the workers."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "/link/" in message:
            record.msg, record.args = redact_text(message), ()
        return True


class PlainFormatter(logging.Formatter):
    """The plain lines (LOG_FORMAT=plain, the development default) with the redaction the
    JSON lines have: a bearer token or a password=... quoted in an error text, its traceback
    included, is masked in every format a deployment may choose."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the run context, and the
    exception if any. Messages and tracebacks (free text, which may quote a remote system's
    answer) pass the same redaction as checkpoints, so a bearer token or an api_key=... in
    an error text never reaches the log."""

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": redact_text(record.getMessage()),
        }
        # Identifiers our own code binds, written as they are: lines are searched by them
        # (a run, a business key, who acted), and a mask could blank one that reads like a
        # "key: value" pair.
        for key in CONTEXT_FIELDS:
            value = getattr(record, key, None)
            if value not in (None, ""):
                line[key] = value if isinstance(value, int | float) else str(value)
        line["process"] = record.process
        if record.exc_info:
            line["exception"] = redact_text(self.formatException(record.exc_info))
        if record.stack_info:
            line["stack"] = redact_text(self.formatStack(record.stack_info))
        return json.dumps(line, ensure_ascii=False, default=str).translate(LINE_BREAKS_ESCAPED)


# Characters JSON leaves as they are but that readers splitting text into lines (Python's
# str.splitlines, many log shippers) take for a line break: a remote system's error text
# holding one would cut a JSON line in two, and forge the second half. Escaped as JSON does.
LINE_BREAKS_ESCAPED = str.maketrans({c: f"\\u{ord(c):04x}" for c in "\x85\u2028\u2029"})
