"""A pending request whose payload cannot be checked because a value it shows is sealed with
a key FIELD_ENCRYPTION_KEYS no longer holds: nobody can decide it until the key is back.
Whoever finds it first, a person deciding (approvals.decisions) or the reminder sweep
(approvals.schedule), holds its run for the key and withdraws the request, through
hold_for_the_key, in the transaction that has the run and the request locked."""

from datetime import datetime

from django.db import transaction

from runs.machine import transitions
from runs.machine.errors import Classified, classify
from runs.models import ErrorClass

from .models import ApprovalRequest
from .requests import hold_unaskable
from .snapshots import SnapshotUnavailable
from .withdrawal import withdraw


def sealed_value_unreadable(problem: SnapshotUnavailable) -> Classified | None:
    """What the payload met, classified, when it is a sealed value no key in the ring opens
    (ErrorClass.UNREADABLE); None for any other problem."""
    if problem.__cause__ is None:
        return None
    cause = classify(problem.__cause__)
    return cause if cause.error_class == ErrorClass.UNREADABLE else None


def hold_for_the_key(approval: ApprovalRequest, problem: SnapshotUnavailable,
                     now: datetime) -> bool:
    """If `problem` is a sealed value the ring cannot open, hold `approval`'s run for the
    key now, in the caller's transaction (the run and the request locked), as the sweep
    holds a wait whose request cannot be made (requests.hold_unaskable: the transition
    approval_unaskable, whose reason is then sealed_value_unreadable), not once the request
    is asked again; and withdraw the request, which the held run no longer waits for (the
    run resumed, its approvers are asked anew). Whether the run was held: not for any other
    problem, nor if the run is only passing through queued or running."""
    if sealed_value_unreadable(problem) is None:
        return False
    with transaction.atomic(), transitions.within_caller_transaction():
        held = hold_unaskable(approval.run_id, approval.step_name, str(problem),
                              cause=problem.__cause__)
    if held:
        approval.run.refresh_from_db()  # the withdrawal says what became of it
        withdraw(approval, now)
    return held
