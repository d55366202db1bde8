"""Asking a remote system whether an effect took place, by its key: the one way a step's or
a tool call's reconcile function is called, so that both read its answer alike."""

from ..definitions import definition
from .errors import classify


def ask(reconcile_fn, *args):
    """Call `reconcile_fn(*args)`: (verdict, error). The verdict is Found, NotFound or
    Undetermined; a lookup that raises is LookupFailed (an Undetermined: only evidence settles
    an unknown outcome), which the runtime asks again within the lookup budget; an answer of
    another type is Undetermined."""
    try:
        verdict = reconcile_fn(*args)
    except Exception as exc:
        message = classify(exc).message
        return definition.LookupFailed(f"lookup failed: {message}"), message
    if not isinstance(verdict, definition.Found | definition.NotFound | definition.Undetermined):
        return definition.Undetermined(f"reconcile returned {type(verdict).__name__}, expected "
                              "Found, NotFound or Undetermined"), ""
    return verdict, ""
