"""Calling the workflow's code that makes an effect: a step's function, a tool's, and the
undo of either. One way for all four, so that each is bounded and read alike: the call runs
under the deadline of its lease (runs.machine.deadline), whatever it raises is classified by
its retry policy, a StepResult gives its value and remote reference, and what the database
cannot store is refused before any row is written (lookups.unstorable). What differs stays
with the caller: a decision's schema (`accept`), how a result is sealed and kept."""

from collections.abc import Callable

from ..definitions import definition
from . import deadline
from .errors import CODE_FAILURES, classify
from .lookups import unstorable
from .transitions.outcome import Outcome


def invoke(what: str, kind: str, fn: Callable, *args, retry: definition.RetryPolicy,
           accept: Callable[[object], object] | None = None) -> Outcome:
    """`fn(*args)` as an Outcome. `what` names the call in a deadline's error ("step
    post-ledger"), `kind` in a refusal of what it returned ("step", "tool", "undo").
    `accept`, given the value, returns the value to record or an Outcome that refuses it."""
    try:
        with deadline.bounded(what):
            value = fn(*args)
    except CODE_FAILURES as exc:
        # A malformed model answer is kept for diagnosis (ModelFormatError.output).
        return Outcome(succeeded=False, error=classify(exc, non_retryable=retry.non_retryable),
                       invalid_output=getattr(exc, "output", None))
    remote_ref = ""
    if isinstance(value, definition.StepResult):
        value, remote_ref = value.value, value.remote_ref
    if accept is not None:
        value = accept(value)
        if isinstance(value, Outcome):
            return value
    refused = unstorable(kind, value, remote_ref)
    if refused is not None:
        return refused
    return Outcome(succeeded=True, value=value, remote_ref=str(remote_ref or ""))
