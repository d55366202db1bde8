"""What a lookup's verdict proves of an effect, by the effect machine's rules
(runs.machine.transitions.effects): when a "not found" may be trusted, how a lookup a
person ran is recorded, and what a run waits for while an effect stays unknown."""

from datetime import timedelta

from ...definitions import definition
from ...models import AttentionReason, ErrorClass
from ..errors import KEY_HOLDS_ANOTHER_REQUEST
from .effect_rows import Effect


def not_found_trusted_from(spec, row, now):
    """When a lookup's "not found" for `row` proves nothing yet, the time from which it will;
    None when it may be trusted now. A receiver that ignores keys may still act on a request
    in flight, so its first "not found" is trusted only `lookup_delay` seconds later (the
    row's next_attempt_at keeps that time): the automation looks again then, and a person's
    lookup before then is told so (looked_up_verdict). A receiver that honours keys makes
    a late request harmless: the resend carries the same key."""
    if spec.honours_key or spec.lookup_delay <= 0:
        return None
    if row.next_attempt_at is not None and row.next_attempt_at <= now:
        return None
    return row.next_attempt_at or now + timedelta(seconds=spec.lookup_delay)


def looked_up_verdict(effect: Effect, verdict, now):
    """A lookup's verdict as a person's reconcile records it: a "not found" that proves
    nothing yet (not_found_trusted_from) leaves the effect unknown, the row remembering when
    a lookup may be trusted, so that the Retry after a "not done" cannot send again what a
    request in flight is about to do; a "found" under a reused key proves nothing of it."""
    if isinstance(verdict, definition.Found) and effect.row.error_class == ErrorClass.KEY_REUSED:
        return definition.Undetermined(KEY_HOLDS_ANOTHER_REQUEST)
    if not isinstance(verdict, definition.NotFound):
        return verdict
    trusted_from = not_found_trusted_from(effect.spec, effect.row, now)
    if trusted_from is None:
        return verdict
    effect.row.next_attempt_at = trusted_from
    return definition.Undetermined(
        f"not found yet: the receiver ignores keys, and a request still in flight could land "
        f"until {trusted_from:%Y-%m-%d %H:%M:%S %Z}; look it up again then")


def still_unknown_reason(verdict, reason: str = "", *, looked_up: bool = False) -> str:
    """Why a run waits for a person while a lookup by key (the runtime's or one a person ran)
    leaves the effect unknown: one that cannot open a sealed value it is asked with
    (LookupUnreadable) waits for the key, SEALED_VALUE_UNREADABLE, whose cure is the key
    ring; any other, for `reason` (what the run waited for already) or UNKNOWN_OUTCOME.
    A lookup that ran (`looked_up`) and answered that it could not tell (Undetermined, not
    a lookup that failed) opened what it is asked with: a run held for the key now waits
    for a person to settle that outcome, UNKNOWN_OUTCOME, not for a key that is back. A
    person's own "undetermined", or another effect of the run still unknown after this
    one's verdict, says nothing of the key."""
    if isinstance(verdict, definition.LookupUnreadable):
        return AttentionReason.SEALED_VALUE_UNREADABLE
    if (looked_up and isinstance(verdict, definition.Undetermined)
            and not isinstance(verdict, definition.LookupFailed)
            and reason == AttentionReason.SEALED_VALUE_UNREADABLE):
        return AttentionReason.UNKNOWN_OUTCOME
    return reason or AttentionReason.UNKNOWN_OUTCOME
