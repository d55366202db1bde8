"""django.request's line for a console request answered 503 because of the database.

Django logs every exception that reaches its handler500 as "<reason>: <path>" with the
traceback, and console.errors.server_error answers the database's outages there (read-only,
away, would not wait, every connection in use). While one lasts, each request logged some
sixty lines: the one that says what is wrong was lost among them. Such a request's line now
says it, and carries no traceback; every other error keeps its traceback.

Named by LOGGING, which is read before the apps are loaded: console.errors is imported when
a record comes."""

import logging

UNAVAILABLE = 503


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
