"""Four eyes for operators: an operator action that needs a second person becomes an approval
request, and runs once another person approves it (approvals.decisions applies it).

When an operator action needs a second person is decided by runs.machine.transitions
(needs_second_person), which also refuses the action without one.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import IntegrityError, transaction
from django.db.models import Q
from guardian.shortcuts import get_users_with_perms

from audit.chain import Actor
from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import Run, Step
from runs.operator.actions import ACTIONS
from runs.permissions import run_access
from runs.reads.step_rows import steps_in_order

from .models import ApprovalRequest, BulkJob, RequestKind
from .requests import create_request, lock_run
from .snapshots import normalise, snapshot_hash
from .timeouts import judged_at

logger = logging.getLogger(__name__)

# Who decides where no person did (a timeout), in the run's records.
SYSTEM_LABEL = "approvals"


def decider(approval: ApprovalRequest) -> Actor:
    """Who decided `approval`, as the run's records name them: the person, or the system
    (nobody decided in time)."""
    if approval.decided_by_id is not None:
        return Actor(kind=AuditRecord.ActorKind.USER, label=approval.decided_by_label,
                     user_id=approval.decided_by_id)
    return Actor.system(approval.decided_by_label or SYSTEM_LABEL)


def requester_refusal(requester, action: str, run_id: int) -> str | None:
    """Why the person who asked for `action` on run `run_id` may no longer have it taken in
    their name, or None. Applied once the second person approves, when the asking person
    may have lost the permission, or their account, since: the action is taken by the rule
    it was asked under (runs.permissions.run_access), not by the approval alone."""
    spec = ACTIONS[action]
    access = run_access(requester, spec.permission, run_id) if requester else None
    if access is not None and access.allowed:
        return None
    name = requester.get_username() if requester else "the person who asked"
    return (f"{name} may no longer {spec.label.lower()} run {run_id} (needs "
            f"runs.{spec.permission}, or their account is not active): the approval does "
            "not act for them")


def requester_actor(approval: ApprovalRequest) -> Actor:
    """The person who asked for `approval`'s operator action, as the run's record of the
    action names them when it is taken: by their account's id and its username now. The
    snapshot keeps the name they had when they asked (what the second person was shown);
    the record of the action names who its actor is, so a rename in between is followed.
    Only an account deleted since leaves the snapshot's name beside no id."""
    if approval.requested_by is not None:
        return Actor.for_user(approval.requested_by)
    return Actor(kind=AuditRecord.ActorKind.USER,
                 label=approval.snapshot.get("requested_by", ""), user_id=None)


def request_operator_action(run: Run | int, *, action: str, requested_by, reason: str,
                            params: dict | None = None, approvers: list[str] | None = None,
                            now: datetime | None = None) -> tuple[ApprovalRequest, bool]:
    """Ask a second person to approve an operator's action on a run.

    The payload is the operator's request (action, run, reason, params). Anyone holding the
    decide permission may approve it except `requested_by`; every other person holding the
    action's own permission on the run's workflow (action_holders), and the approvers named
    in settings.APPROVALS_FOUR_EYES_APPROVERS (or `approvers`), get it as an object
    permission and an email. Once approved, the action is performed through runs.operator.actions
    with the approver as the second person. Returns (request, created): an open request for the
    same action on the same run is returned as it is rather than duplicated.
    """
    spec = ACTIONS.get(action)
    if spec is None or not spec.may_need_second_person:
        raise ValueError(f"{action!r} is not an operator action that takes a second person; "
                         f"those are: {', '.join(sorted(transitions.SECOND_PERSON_ACTIONS))}")
    if not reason or not reason.strip():
        raise ValueError("an operator action needs a reason")
    run = run if isinstance(run, Run) else Run.objects.get(pk=run)
    names = list(approvers or settings.APPROVALS_FOUR_EYES_APPROVERS)
    names += [f"user:{username}" for username in action_holders(run, spec.permission)
              if username != requested_by.get_username()]
    snapshot = _action_snapshot(run, action=action, requested_by=requested_by.get_username(),
                                reason=reason.strip(), params=params or {})
    timeout = timedelta(seconds=settings.APPROVALS_FOUR_EYES_TIMEOUT_SECONDS)
    every = timedelta(seconds=settings.APPROVALS_FOUR_EYES_REMIND_SECONDS)
    existing = ApprovalRequest.objects.filter(run=run, kind=RequestKind.OPERATOR_ACTION,
                                              action=action, settled_at__isnull=True)
    try:
        with transaction.atomic(durable=True):
            # Dated by the database's clock as the run is locked, by which the sweep times
            # it out and reminds (timeouts.judged_at): the web server's own clock, or its
            # estimate of the database's, if off, would open a request overdue or late.
            now = judged_at(now, lock_run(run.pk))
            found = existing.first()
            if found is not None:
                if dict(found.params).get("step", "") != snapshot["params"].get("step", ""):
                    # One open request per action and run: another step's would be
                    # answered with this one, which its approver could take for theirs.
                    # Named by its label, as the button the person pressed names it.
                    raise ValueError(
                        f"approval request {found.pk} already asks for {spec.label} of run "
                        f"{run.pk} at step {dict(found.params).get('step')!r}: it is decided "
                        "or withdrawn first, then another step can be asked for")
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


def _action_snapshot(run: Run, *, action: str, requested_by: str, reason: str,
                     params: dict) -> dict:
    # Each effect with its state: the second person sees what may have happened too.
    high_impact = [str(e) for e in transitions.high_impact_effects(
        list(steps_in_order(run=run)))]
    return normalise({
        "action": action, "run": run.pk, "workflow": run.workflow_name,
        "business_key": run.business_key, "run_status": run.status,
        "requested_by": requested_by, "reason": reason, "params": params,
        "high_impact_effects": high_impact,
    })


def changed_effects_snapshot(approval: ApprovalRequest) -> tuple[dict, str] | None:
    """For a pending request for an operator action (on one run, or on a bulk job's runs):
    its snapshot as it would be now, if the high-impact effects it lists (what may have
    happened) are not those of its runs any more, else None. The second person decides on
    the effects they were shown; the runs' passing states (queued, running, waiting) alone
    change nothing."""
    if approval.kind != RequestKind.OPERATOR_ACTION:
        return None
    shown = approval.snapshot
    if approval.params.get("bulk_job"):
        snapshot = normalise({**shown, "high_impact_effects": bulk_effects(
            approval.params.get("runs", []))})
    else:
        snapshot = _action_snapshot(approval.run, action=approval.action,
                                    requested_by=shown.get("requested_by", ""),
                                    reason=shown.get("reason", ""),
                                    params=shown.get("params", {}))
    if snapshot["high_impact_effects"] == shown.get("high_impact_effects"):
        return None
    return snapshot, snapshot_hash(snapshot)


def bulk_effects(run_ids: list[int]) -> list[str]:
    """The high-impact effects that stand or may stand in the runs of a bulk job, each
    named with its run: what its one request shows the second person (the steps in one
    query; the agent steps' calls in one more per run that has any)."""
    steps: dict[int, list[Step]] = {}
    for step in steps_in_order(run_id__in=list(run_ids)):
        steps.setdefault(step.run_id, []).append(step)
    return [f"run {run_id}: {effect}" for run_id in sorted(steps)
            for effect in transitions.high_impact_effects(steps[run_id])]


def request_bulk_operator_action(job, run_ids: list[int], *,
                                 now: datetime | None = None) -> ApprovalRequest | None:
    """One approval request for the runs of bulk job `job` that need a second person: it
    lists them all, and approving it performs the job's action on each (approvals.decisions)
    with the approver as the second person. The request hangs on one of the runs (a request
    belongs to a run): the first without an open request of its own for the action. None if
    every run has one (each is then decided on its own)."""
    spec = ACTIONS[job.action]
    if not spec.may_need_second_person:
        raise ValueError(f"{job.action!r} never takes a second person")
    snapshot = normalise({
        "action": job.action, "bulk_job": job.pk, "runs": sorted(run_ids),
        "run_count": len(run_ids), "filters": job.filters,
        "requested_by": job.requested_by.get_username(), "reason": job.reason,
        "params": {"bulk_job": job.pk, "runs": sorted(run_ids), **(job.params or {})},
        "high_impact_effects": bulk_effects(run_ids),
    })
    names = list(settings.APPROVALS_FOUR_EYES_APPROVERS)
    for anchor in Run.objects.filter(pk__in=run_ids).order_by("pk"):
        try:
            with transaction.atomic(durable=True):
                # Dated as request_operator_action's.
                when = judged_at(now, lock_run(anchor.pk))
                approval = create_request(
                    kind=RequestKind.OPERATOR_ACTION, run=anchor, action=job.action,
                    params=snapshot["params"], requested_by=job.requested_by,
                    snapshot=snapshot, snapshot_hash=snapshot_hash(snapshot), approvers=names,
                    remind_every=timedelta(seconds=settings.APPROVALS_FOUR_EYES_REMIND_SECONDS),
                    timeout=timedelta(seconds=settings.APPROVALS_FOUR_EYES_TIMEOUT_SECONDS),
                    on_timeout="cancel", now=when)
                # Named by the job in the request's own commit: committed apart, the request
                # could be replaced before the job named it, and the job would name the
                # replaced one.
                BulkJob.objects.filter(pk=job.pk).update(approval=approval)
        except IntegrityError:
            continue  # this run already has an open request for the action
        logger.info("bulk job %s: %s on %d runs requested by %s: approval request %s",
                    job.pk, job.action, len(run_ids), job.requested_by.get_username(),
                    approval.pk)
        return approval
    return None


def action_holders(run: Run, codename: str) -> list[str]:
    """The usernames of the active people who may do the action with permission `codename`
    on `run`'s workflow: superusers, holders of the global permission (themselves or through
    a group), holders of the object permission on the workflow row. The same rule as the
    console's (console.permissions.grant_for), asked the other way round, in three queries."""
    users = get_user_model().objects.filter(is_active=True)
    permission = Permission.objects.filter(content_type__app_label="runs",
                                           codename=codename).first()
    everywhere = Q(is_superuser=True)
    if permission is not None:
        everywhere |= Q(user_permissions=permission) | Q(groups__permissions=permission)
    names = set(users.filter(everywhere).values_list("username", flat=True))
    if run.workflow_id is not None:
        holders = get_users_with_perms(run.workflow, only_with_perms_in=[codename],
                                       with_group_users=True, with_superusers=False)
        names |= {u.get_username() for u in holders if u.is_active}
    return sorted(names)
