"""Four eyes for operators: an operator action that needs a second person becomes an approval
request, and runs once another person approves it (approvals.decisions applies it).

When an operator action needs a second person is decided by runs.transitions
(needs_second_person), which also refuses the action without one.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs import transitions
from runs.actions import ACTIONS
from runs.models import Run, Step

from .models import ApprovalRequest, RequestKind
from .requests import create_request
from .snapshots import normalise, snapshot_hash

logger = logging.getLogger(__name__)


def request_operator_action(run: Run | int, *, action: str, requested_by, reason: str,
                            params: dict | None = None, approvers: list[str] | None = None,
                            now: datetime | None = None) -> tuple[ApprovalRequest, bool]:
    """Ask a second person to approve an operator's action on a run.

    The payload is the operator's request (action, run, reason, params). Anyone holding the
    decide permission may approve it except `requested_by`; the approvers named in
    settings.APPROVALS_FOUR_EYES_APPROVERS (or `approvers`) get it as an object permission
    and an email. Once approved, the action is performed through runs.actions with the
    approver as the second person. Returns (request, created): an open request for the
    same action on the same run is returned as it is rather than duplicated.
    """
    spec = ACTIONS.get(action)
    if spec is None or not spec.may_need_second_person:
        raise ValueError(f"{action!r} is not an operator action that takes a second person; "
                         f"those are: {', '.join(sorted(transitions.SECOND_PERSON_ACTIONS))}")
    if not reason or not reason.strip():
        raise ValueError("an operator action needs a reason")
    now = now or timezone.now()
    run = run if isinstance(run, Run) else Run.objects.get(pk=run)
    names = list(approvers or settings.APPROVALS_FOUR_EYES_APPROVERS)
    # Each effect with its state: the second person sees what may have happened too.
    high_impact = [str(e) for e in transitions.high_impact_effects(
        list(Step.objects.filter(run=run).order_by("position")))]
    snapshot = normalise({
        "action": action, "run": run.pk, "workflow": run.workflow_name,
        "business_key": run.business_key, "run_status": run.status,
        "requested_by": requested_by.get_username(), "reason": reason.strip(),
        "params": params or {}, "high_impact_effects": high_impact,
    })
    timeout = timedelta(seconds=settings.APPROVALS_FOUR_EYES_TIMEOUT_SECONDS)
    every = timedelta(seconds=settings.APPROVALS_FOUR_EYES_REMIND_SECONDS)
    existing = ApprovalRequest.objects.filter(run=run, kind=RequestKind.OPERATOR_ACTION,
                                              action=action, settled_at__isnull=True)
    try:
        with transaction.atomic(durable=True):
            found = existing.first()
            if found is not None:
                return found, False
            approval = create_request(
                kind=RequestKind.OPERATOR_ACTION, run=run, action=action,
                params=snapshot["params"], requested_by=requested_by, snapshot=snapshot,
                snapshot_hash=snapshot_hash(snapshot), approvers=names, remind_every=every,
                timeout=timeout, on_timeout="cancel", now=now)
    except IntegrityError:
        return existing.get(), False
    logger.info("operator action %s on run %s requested by %s: approval request %s",
                action, run.pk, requested_by.get_username(), approval.pk)
    return approval, True
