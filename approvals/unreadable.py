"""A pending request whose payload cannot be checked because a value it shows is sealed with
a key FIELD_ENCRYPTION_KEYS no longer holds: nobody can decide it until the key is back.
Whoever finds it first, a person deciding (approvals.decisions), the reminder or the timeout
sweep (approvals.schedule), reads what its payload says now before its transaction
(payload_now), and under its locks, before it reminds, times out or records anything, holds
its run for the key and withdraws the request (hold_for_the_key). A request nobody can
decide is never reminded, escalated to deputies, or decided by its timeout policy. (One
whose key was gone before it was made is never made: the sweep holds the run for the key
instead, as it does for any wait whose request cannot be made: requests.hold_unaskable.)"""

from datetime import datetime

from django.db import transaction

from audit.chain import Actor
from runs.machine import transitions
from runs.machine.errors import Classified, classify
from runs.models import ErrorClass, ToolCall

from .models import ApprovalRequest, RequestKind
from .requests import current_snapshot, hold_unaskable
from .snapshots import SnapshotUnavailable, unopened_arguments
from .withdrawal import withdraw

# hold_for_the_key's answers for a payload showing a value no key in the ring opens: the run
# was held for the key now and the request withdrawn; or the run is only passing through
# queued or running, and whoever comes next (the next pass, the next decision) holds it.
HELD = "held"
PASSING = "passing"


def sealed_value_unreadable(problem: SnapshotUnavailable) -> Classified | None:
    """What the payload met, classified, when it is a sealed value no key in the ring opens
    (ErrorClass.UNREADABLE); None for any other problem."""
    if problem.__cause__ is None:
        return None
    cause = classify(problem.__cause__)
    return cause if cause.error_class == ErrorClass.UNREADABLE else None


def payload_now(approval: ApprovalRequest) -> tuple[dict, str] | SnapshotUnavailable | None:
    """What `approval`'s payload says now, read before the caller's transaction (a step's
    snapshot function reads the run's results, and should hold no lock while it does):
    - an approval step's: its snapshot and hash as they would be now
      (requests.current_snapshot), or why it cannot be computed;
    - a tool call's: None, or why its arguments cannot be opened. Its snapshot is not
      computed again: what it shows and what a decision is bound to are the arguments the
      model proposed, fixed with the call (their hash, which runs' decide_tool_call checks),
      and other arguments are another call, whose own request supersedes this one
      (requests.open_tool_call_request). It shows a sealed value as the mask
      (sensitive.shown), so it reads as before once the key left; what a lost key changes
      is whether the call, approved, can ever be made: the worker must open its arguments.
      The question its opening asked (snapshots.unopened_arguments), asked again;
    - an operator action's: None (its effects are rows only, read under the lock:
      payload_check.payload_outcome)."""
    if approval.kind == RequestKind.STEP:
        return current_snapshot(approval)
    if approval.kind != RequestKind.TOOL_CALL:
        return None
    arguments = (ToolCall.objects.filter(pk=approval.tool_call_id)
                 .values_list("arguments", flat=True).first())
    return unopened_arguments(approval.params.get("tool_call"), arguments)


def hold_for_the_key(approval: ApprovalRequest, current, now: datetime, *,
                     by: Actor | None = None) -> str | None:
    """In the caller's transaction, with `approval`'s run and then the request locked and the
    request pending: None if `current` (payload_now's answer) shows no value sealed with a
    key the ring no longer holds, and the caller goes on. Otherwise nothing may be decided,
    reminded or timed out, and:
    - HELD: the run is held for the key now, as the sweep holds a wait whose request
      cannot be made (requests.hold_unaskable: the transition approval_unaskable, whose
      reason is then sealed_value_unreadable), not once the request is asked again; and the
      request, which the held run no longer waits for, is withdrawn (the run resumed, its
      approvers are asked anew);
    - PASSING: the run is only passing through queued or running, and is held by whoever
      finds it next.
    `by`: the person whose decision found it, whom the hold's record and the withdrawal's
    name (they acted); the approvals system otherwise (the sweep)."""
    if not isinstance(current, SnapshotUnavailable) or sealed_value_unreadable(current) is None:
        return None
    call = approval.params.get("tool_call") if approval.kind == RequestKind.TOOL_CALL else None
    with transaction.atomic(), transitions.within_caller_transaction():
        held = hold_unaskable(approval.run_id, approval.step_name, str(current),
                              tool_call=call, cause=current.__cause__, actor=by)
    if not held:
        return PASSING
    approval.run.refresh_from_db()  # the withdrawal says what became of it
    # The same act as the hold, and named as it is: a person's decision that found it
    # withdrew the request, as it held the run.
    withdraw(approval, now, actor=by)
    return HELD
