"""Asking a remote system whether an effect took place, by its key: the one way a step's or
a tool call's reconcile function is called, so that both read its answer alike."""

import dataclasses
from collections.abc import Callable

from ..definitions import definition
from ..models import ErrorClass
from . import artifacts, deadline, tracing
from .errors import CODE_FAILURES, Classified, classify
from .storable import printable, text_problem
from .transitions.outcome import Outcome, unstorable_result


def ask(ctx, *, kind: str, what: str, reconcile: Callable[[], object], stem: str,
        sealed: Callable[[object], object]):
    """Look an effect up by its key (`reconcile()`, a step's or a tool's reconcile function
    with its arguments), as a span of the run's trace: (verdict, error). The verdict is
    Found, NotFound or Undetermined; a lookup that raises is LookupFailed (an Undetermined:
    only evidence settles an unknown outcome), which the runtime asks again within the
    lookup budget, or, where it could not open a sealed value it is asked with (a tool
    call's arguments, an earlier result), LookupUnreadable, which waits for the key; an
    answer of another type is Undetermined, and so is one the database cannot store
    (unusable_answer, kept_answer), with the problem as its error.

    A Found's result comes back as the effect's row is to keep it (kept_answer): `sealed`
    is how that row seals a result, `stem` names its artifact, as the call's own result's."""
    with tracing.step_span(ctx, kind=kind, what=what) as span:
        verdict, error = _answer(reconcile)
        if isinstance(verdict, definition.Found):
            verdict, error = kept_answer(verdict, ctx.run_id, stem, sealed)
        tracing.record_verdict(span, verdict, error)
    return verdict, error


def kept_answer(verdict, run_id: int, stem: str, sealed: Callable[[object], object]):
    """A Found whose result is kept by the one rule of a call's result
    (artifacts.kept_result: apart as an artifact when large), sealed first as its row seals
    one: (verdict, ""); or, over RUNS_RESULT_MAX_BYTES, an answer nobody can record, as
    unusable_answer's: (Undetermined, the problem naming size and limit)."""
    # A lookup is asked only of an effect that may stand: the error class is not read.
    value, too_large = artifacts.kept_result(run_id, stem, sealed(verdict.result),
                                             has_side_effect=True)
    if too_large is not None:
        problem = f"lookup returned a result that cannot be stored: {too_large.message}"
        return definition.Undetermined(problem), problem
    return dataclasses.replace(verdict, result=value), ""


def _answer(reconcile: Callable[[], object]):
    try:
        with deadline.bounded("lookup by key"):
            verdict = reconcile()
    except CODE_FAILURES as exc:
        classified = classify(exc)
        if classified.error_class == ErrorClass.UNREADABLE:
            # A sealed value it is asked with cannot be opened: asked again, it fails again
            # until a person puts the key back (effects.settle holds the run for them).
            return definition.LookupUnreadable(classified.message), classified.message
        message = classified.message
        return definition.LookupFailed(f"lookup failed: {message}"), message
    if not isinstance(verdict, definition.Found | definition.NotFound | definition.Undetermined):
        return definition.Undetermined(f"reconcile returned {type(verdict).__name__}, expected "
                              "Found, NotFound or Undetermined"), ""
    problem = unusable_answer(verdict)
    if problem is not None:
        return definition.Undetermined(problem), problem
    return verdict, ""


def unusable_answer(verdict) -> str | None:
    """Why a lookup's answer cannot be stored (a result or reference the database refuses,
    a reason with a NUL), said as a reason the lookup could not tell, or None. Nobody can
    use an answer that cannot be recorded: the outcome stays unknown, for a person."""
    if isinstance(verdict, definition.Found):
        ref, problem = verdict.ref, None
        # A reference names the effect: one read from another type could name another, so
        # it settles nothing (one too long to keep is refused by unstorable, as any call's).
        if not isinstance(ref, str):
            problem = f"lookup returned a reference that is no text ({type(ref).__name__})"
        elif (refused := unstorable("lookup", verdict.result, ref)) is not None:
            problem = refused.error.message
    elif isinstance(verdict, definition.Undetermined):
        reason = text_problem(str(verdict.reason))
        problem = (f"lookup returned a reason that cannot be stored: {reason}: "
                   f"{printable(str(verdict.reason))}") if reason else None
    else:
        problem = None
    return printable(problem) if problem is not None else None


def unstorable(what: str, value, remote_ref) -> Outcome | None:
    """unstorable_result for what a call returned (a step, an undo, a lookup), its remote
    reference read as text first: a reference whose str() raises cannot be stored either."""
    try:
        ref = str(remote_ref or "")
    except Exception as exc:
        return Outcome(succeeded=False, error=Classified(
            ErrorClass.UNCLASSIFIED, f"{what} returned a remote reference that cannot be "
                                     f"read as text: {classify(exc).message}"))
    return unstorable_result(what, value, ref)


def verdict_text(verdict) -> str:
    """A lookup's verdict for a log line: found (with the reference), not found, or cannot
    tell (with why); never the found result, which may be large or hold what the step's
    result does (the step's row keeps it, sealed)."""
    if verdict is None:
        return "no reconcile function"
    if isinstance(verdict, definition.Found):
        return f"found {printable(str(verdict.ref))[:200]}"
    if isinstance(verdict, definition.NotFound):
        return "not found"
    return f"cannot tell: {printable(str(getattr(verdict, 'reason', '')))[:200]}"
