"""The run a log line is about, bound around the work so every line carries it.

The runtime binds run id, workflow, business key, step and idempotency key here; the
logging filter of observability.logs copies them onto each record, whichever logger wrote
it (the runtime's, httpx's, Celery's). Context variables follow threads and asyncio tasks,
which thread-locals would not.
"""

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

# The fields a line may carry about the run it concerns, in the order they are written.
CONTEXT_FIELDS = ("run_id", "workflow", "business_key", "step", "idempotency_key", "actor",
                  "task_id")

# Holds a dict that is replaced, never changed in place (so a copied context cannot see a
# later change); None until something is bound.
_context: contextvars.ContextVar[dict | None] = contextvars.ContextVar("log_context",
                                                                      default=None)


def log_fields() -> dict:
    return _context.get() or {}


@contextmanager
def log_context(**fields) -> Iterator[None]:
    """Add `fields` to every log line written inside the block (nested blocks add to the
    outer one's fields and restore them on exit)."""
    unknown = set(fields) - set(CONTEXT_FIELDS)
    if unknown:
        raise ValueError(f"unknown log context fields: {', '.join(sorted(unknown))}")
    token = _context.set({**log_fields(), **{k: v for k, v in fields.items()
                                              if v not in (None, "")}})
    try:
        yield
    finally:
        _context.reset(token)


def bind(**fields) -> contextvars.Token:
    """Like log_context, for code that cannot wrap a block (signal handlers): pass the
    returned token to unbind()."""
    return _context.set({**log_fields(), **{k: v for k, v in fields.items()
                                             if k in CONTEXT_FIELDS and v not in (None, "")}})


def unbind(token: contextvars.Token) -> None:
    _context.reset(token)


def current() -> dict:
    return dict(log_fields())
