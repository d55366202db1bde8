"""What a pending request's payload says now, asked before anything is done with the
request: a reminder (approvals.schedule), a timeout (the same sweep) and a person's decision
(approvals.decisions) each read it before their transaction (unreadable.payload_now) and,
with the run and then the request locked, ask it here first, in one order, so that whoever
comes first does the same:
- a value it shows is sealed with a key the ring no longer holds: nobody can decide it, so
  its run is held for the key (unreadable.hold_for_the_key);
- it changed since the request was made: the request can never be approved, and is
  superseded by one that asks about the payload as it is now (requests.supersede).
Only then is anyone reminded, the timeout policy applied, or a decision recorded: a
reminder, an escalation or a decision on a payload that is no longer the run's would be
about what nobody is asked any more. An operator action's payload is the high-impact effects
that stand in its runs (four_eyes.changed_effects_snapshot): payload_now reads nothing for
it, and payload_outcome reads them here, under the locks, once, for all three: a reminder
mailing its approvers about effects that are no longer the run's, or a timeout cancelling
it, would be about what nobody was shown."""

from datetime import datetime

from audit.chain import Actor

from .four_eyes import changed_effects_snapshot
from .models import ApprovalRequest, RequestKind
from .requests import supersede
from .unreadable import hold_for_the_key

# payload_outcome's answer for a request its changed payload superseded (the request names
# its successor: superseded_by).
SUPERSEDED = "superseded"


def payload_outcome(approval: ApprovalRequest, current, now: datetime, *,
                    by: Actor | None = None) -> str | None:
    """In the caller's transaction, with `approval`'s run and then the request locked and
    the request pending, what `current` (payload_now's answer) makes of it: HELD or PASSING
    (unreadable.hold_for_the_key, `by` the person whose decision found it), SUPERSEDED
    (superseded_if_changed; for an operator action, by its effects as they are now), or
    None: the payload stands, and the caller goes on."""
    if (held := hold_for_the_key(approval, current, now, by=by)) is not None:
        return held
    if approval.kind == RequestKind.OPERATOR_ACTION:
        # Rows only, read with the run locked: an effect settled by a transition the caller
        # waited for is one its approvers were never shown.
        current = changed_effects_snapshot(approval)
    if superseded_if_changed(approval, current, now) is not None:
        return SUPERSEDED
    return None


def superseded_if_changed(approval: ApprovalRequest, current,
                          now: datetime) -> ApprovalRequest | None:
    """In the caller's transaction, with `approval` locked and pending: if `current` is a
    payload (snapshot, hash) that differs from the one it was asked with, supersede it and
    return its successor (a new request with the current payload, notified, due after its
    own timeout); else None. `current`: payload_now's answer, or an operator action's
    effects as they are now (four_eyes.changed_effects_snapshot)."""
    if not isinstance(current, tuple) or current[1] == approval.snapshot_hash:
        return None
    return supersede(approval, *current, now)
