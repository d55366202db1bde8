"""django.request's line for a request refused as the person's or client's condition (4xx),
and for a console request answered 503 because of the database.

Django logs every exception that reaches its handler500 as "<reason>: <path>" with the
traceback, and console.errors.server_error answers the database's outages there (read-only,
away, would not wait, every connection in use). While one lasts, each request logged some
sixty lines: the one that says what is wrong was lost among them. Such a request's line now
says it, and carries no traceback; every other error keeps its traceback.

Django logs a refusal (PermissionDenied, a bad request) with the traceback of the exception
too, as if the code had failed: a person who may not view a run left thirty lines. Such a
line now says the refusal's own words, without a traceback.

Named by LOGGING, which is read before the apps are loaded: console.errors is imported when
a record comes."""

import logging

UNAVAILABLE = 503


class ClientErrorLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and 400 <= getattr(record, "status_code", 0) < 500:
            said, why = record.getMessage(), " ".join(str(exc).split())
            if why and why not in said:
                record.msg, record.args = "%s: %s", (said, why)
            record.exc_info, record.exc_text = None, None
        return True


class OutageLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None and getattr(record, "status_code", None) == UNAVAILABLE:
            from .errors import outage_line

            said = outage_line(exc)
            if said is not None:
                record.msg, record.args = "%s: %s", (record.getMessage(), " ".join(said.split()))
                record.exc_info, record.exc_text = None, None
        return True
