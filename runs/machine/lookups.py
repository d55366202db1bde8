"""Asking a remote system whether an effect took place, by its key: the one way a step's or
a tool call's reconcile function is called, so that both read its answer alike."""

from collections.abc import Callable

from ..definitions import definition
from . import deadline, tracing
from .errors import classify


def ask(ctx, *, kind: str, what: str, reconcile: Callable[[], object]):
    """Look an effect up by its key (`reconcile()`, a step's or a tool's reconcile function
    with its arguments), as a span of the run's trace: (verdict, error). The verdict is
    Found, NotFound or Undetermined; a lookup that raises is LookupFailed (an Undetermined:
    only evidence settles an unknown outcome), which the runtime asks again within the
    lookup budget; an answer of another type is Undetermined."""
    with tracing.step_span(ctx, kind=kind, what=what) as span:
        verdict, error = _answer(reconcile)
        tracing.record_verdict(span, verdict, error)
    return verdict, error


def _answer(reconcile: Callable[[], object]):
    try:
        with deadline.bounded("lookup by key"):
            verdict = reconcile()
    except Exception as exc:
        message = classify(exc).message
        return definition.LookupFailed(f"lookup failed: {message}"), message
    if not isinstance(verdict, definition.Found | definition.NotFound | definition.Undetermined):
        return definition.Undetermined(f"reconcile returned {type(verdict).__name__}, expected "
                              "Found, NotFound or Undetermined"), ""
    return verdict, ""
