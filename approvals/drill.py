"""The drill kit's approver: what a drill run waits for is approved through its approval
request, the path a person's approval takes, not straight through the transition.

runs.operator.drills cannot import this app (approvals sits above runs), so ApprovalsConfig.ready
registers approve_for_drill with runs.operator.drills.register_approver. For each tool call,
approval step and attempt of a step with the stop verdict the run waits on, the request is
opened as the sweeper would (its approvers granted; a drill run's notify nobody), the drill's
own user is granted the decide permission on that request alone, and decides it with
approvals.decisions.decide: the claim on the request, then decide_tool_call / decide_approval
applied by apply_to_run, with the request's payload hash.

The drill user ("drill") has no password and no permission but those object permissions.
An account of that name that someone can sign in with is a person's, not the drill's: the
drill refuses to decide as it (drill_user), since every decision it recorded would name that
person as having approved what they never saw.
"""

import uuid

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from guardian.shortcuts import assign_perm

from runs.machine import transitions
from runs.models import Run
from runs.operator.drills import is_drill_run

from .decisions import decide
from .models import DECIDE_CODENAME, ApprovalRequest, RequestKind, RequestStatus
from .requests import open_request, open_tool_call_request

DRILL_USERNAME = "drill"


def drill_user():
    """The drill's own account, made on first use. ValueError if an account of its name is
    one a person signs in with (a password, staff or superuser): the drill never decides,
    nor is granted anything, as a person."""
    user, created = get_user_model().objects.get_or_create(username=DRILL_USERNAME)
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    elif user.has_usable_password() or user.is_staff or user.is_superuser:
        raise ValueError(
            f"the account {DRILL_USERNAME!r} (id {user.pk}) is a person's: it has a password "
            "or staff rights, and the drill approves as an account of that name that nobody "
            "signs in with. Nothing was approved; rename that person's account, and the "
            "drill makes its own on its next run.")
    return user


def approve_for_drill(run: Run) -> bool:
    """Open and approve, as the drill user, every request `run` waits on. True if a
    decision was recorded (the run can be advanced again). Refuses any run a drill did not
    start: the drill user approves drills, never real work."""
    if not is_drill_run(run):
        raise PermissionDenied(f"run {run.pk} ({run.business_key}) is not a drill run; the "
                               "drill approver decides nothing for it")
    # Before anything is opened or granted: refused, the drill leaves the run as it was.
    user = drill_user()
    for call in transitions.waiting_tool_calls(run):
        open_tool_call_request(call)
    # An approval step's, or an attempt's of a step with the stop verdict: a step's waits.
    for name in run.approval_waits.filter(tool_call__isnull=True).values_list("step_name",
                                                                              flat=True):
        open_request(run, name)
    recorded = False
    pending = ApprovalRequest.objects.filter(
        run=run, status=RequestStatus.PENDING, settled_at__isnull=True,
        kind__in=(RequestKind.TOOL_CALL, RequestKind.STEP)).order_by("pk")
    for approval in pending:
        assign_perm(DECIDE_CODENAME, user, approval)
        decision = decide(approval.pk, user=user, approved=True, decision_id=uuid.uuid4(),
                          comment="approved by the drill")
        recorded = recorded or decision.recorded
    return recorded
