"""Who may decide an approval request: the project's one permission rule, applied to
approval requests.

Allowed if the user is a superuser, or holds the global permission
`approvals.decide_approvalrequest`, or holds it on this request as a django-guardian object
permission (granted to the user or to one of their groups when the request is made or
escalated). Guardian does not treat a global permission as satisfying an object check,
hence the explicit order. Four eyes: whoever asked for a request (its `requested_by`) never
decides it, whatever else they hold. One rule, is_requester, for every kind of request:

- an operator action (approvals.four_eyes): the operator who asked for it;
- an agent's tool call (approvals.requests.open_tool_call_request): the operator whose
  retry_tool_call sent that call again most recently, when a person did (tool_call_requester).
  A retried call whose tool asks for approval of its arguments waits for a person again
  (runs.machine.transitions.agent_operator), so the person who resends money is never the one
  who approves the resend. A call the model asked for and nobody retried has no requester:
  runs are started by API tokens and by the system, never on a user's behalf (a token
  records the admin who created it, not a person who asks), so there is nobody else to
  exclude;
- an attempt of a step with the stop verdict (runs.machine.transitions.stop_gate): the
  operator who sent that attempt (Retry step, or Resume of the run it stopped) since the
  previous attempt's decision, when a person did (step_requester): the same rule as a
  resent tool call's;
- an approval step: no requester (the workflow asks), so any approver decides.
The requester is left out of the approvers' notifications and inbox, and is refused by
can_decide when deciding.
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import BigIntegerField, BooleanField, Exists, OuterRef, Q, Subquery, Value
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce
from guardian.core import ObjectPermissionChecker

from runs.machine.transitions.agent_calls import retried_by
from runs.machine.transitions.approval_waits import step_sent_again_by
from runs.models import Run
from runs.operator.actions import ACTIONS
from runs.permissions import grants_of

from .models import (
    DECIDE_CODENAME,
    DECIDE_PERMISSION,
    ApprovalRequest,
    ApprovalRequestGroupObjectPermission,
    ApprovalRequestUserObjectPermission,
    BulkOutcome,
    RequestKind,
)

# Set on a user object while the grants of one answer, or of one batch, are read once
# (permissions_read_once): what was read of them (GrantsRead).
GRANTS_ATTRIBUTE = "approvals_grants_read"


@dataclass
class GrantsRead:
    """What has been read of one person's grants on approval requests."""

    # Guardian's checker, holding the object permissions it has read.
    checker: ObjectPermissionChecker
    # Whether they still may decide an operator action's request (still_an_approver), by
    # the request's id, for the requests asked about already.
    still_approver: dict[int, bool] = field(default_factory=dict)


@contextmanager
def permissions_read_once(user, approvals: Sequence[ApprovalRequest] = ()) -> Iterator[None]:
    """While inside, the grants `user` holds on a request are read once and every check of
    the rule below reuses them: a decision is checked by the page (may they see it, may
    they decide it) and again by decisions.decide, before its lock and under it, and
    guardian's backend would read the same two tables afresh for each (and, for an operator
    action, whether they still hold its role). With `approvals` (a batch, such as the
    notifications one publishing pass sends), the grants on all of them are read at once:
    two queries, and one for the operator actions among them, however many they are.
    Every check is still made, on the request's row as it is then (its kind, its
    requester); only the grants are not read again within one answer or one batch.
    Nested, the outermost read serves."""
    if getattr(user, GRANTS_ATTRIBUTE, None) is not None or not getattr(
            user, "is_authenticated", False):
        yield
        return
    read = GrantsRead(ObjectPermissionChecker(user))
    if approvals and user.is_active and not user.is_superuser:
        read.checker.prefetch_perms(approvals)
        actions = [a.pk for a in approvals if a.kind == RequestKind.OPERATOR_ACTION]
        if actions:
            still = set(ApprovalRequest.objects.filter(pk__in=actions).filter(
                still_approver_of(user)).values_list("pk", flat=True))
            read.still_approver = {pk: pk in still for pk in actions}
    setattr(user, GRANTS_ATTRIBUTE, read)
    try:
        yield
    finally:
        delattr(user, GRANTS_ATTRIBUTE)


def has_decide_permission(user, approval: ApprovalRequest) -> bool:
    """The permission rule alone, without the four-eyes exclusion."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser or user.has_perm(DECIDE_PERMISSION):
        return True
    read = getattr(user, GRANTS_ATTRIBUTE, None)
    # The checker asks what guardian's backend asks, of the rows it has read already.
    held = (read.checker.has_perm(DECIDE_CODENAME, approval) if read is not None
            else user.has_perm(DECIDE_PERMISSION, approval))
    if not held:
        return False
    return approval.kind != RequestKind.OPERATOR_ACTION or still_an_approver(user, approval)


def still_an_approver(user, approval: ApprovalRequest) -> bool:
    """An operator action's approver asked by name because they held the action's own
    permission (approvals.four_eyes.action_holders) decides only while they still hold it:
    the grant on the request outlives a role taken away since. Approvers named in
    settings.APPROVALS_FOUR_EYES_APPROVERS, or through a group, keep the right that names
    them. Asked of one request by the condition the inbox asks of all of them (once per
    answer or batch, within permissions_read_once)."""
    read = getattr(user, GRANTS_ATTRIBUTE, None)
    if read is not None and approval.pk in read.still_approver:
        return read.still_approver[approval.pk]
    still = ApprovalRequest.objects.filter(pk=approval.pk).filter(
        still_approver_of(user)).exists()
    if read is not None:
        read.still_approver[approval.pk] = still
    return still


def still_approver_of(user) -> Q:
    """still_an_approver as a condition on approval requests: the operator action requests
    `user` still may decide, if their object permission names them (one query in all, a
    query or two per operator permission to build it)."""
    if f"user:{user.get_username()}" in settings.APPROVALS_FOUR_EYES_APPROVERS:
        return Q(kind=RequestKind.OPERATOR_ACTION)
    held = granted_on_each(user, by_name=False)
    grants = grants_of(user)
    for name, spec in ACTIONS.items():
        if not spec.may_need_second_person:
            continue
        grant = grants(spec.permission)
        if grant.everywhere:
            held |= Q(action=name)
        elif grant.workflow_ids:
            held |= Q(action=name) & reaching_only(workflow_ids=grant.workflow_ids)
    return Q(kind=RequestKind.OPERATOR_ACTION) & held


# The most grants on approval requests read to list a person's inbox from their grants
# (granted_to): past this many, the open requests are read instead, each checked.
GRANTS_READ_AT_MOST = 1000


def granted_to(user) -> Q:
    """granted_on_each(user) (the decide permission granted on the request to the user or
    one of their groups), as the inbox reads it: from the smaller of the two sides. Each
    open request checked costs every open request (18,684 at a million runs, for an
    approver named on thirty of them); the person's grants cost what they were ever
    granted (116,806 for a group named on every request). So the grants are read first,
    GRANTS_READ_AT_MOST of them at most along the indexes that start with the group and the
    user: when that is all of them, the condition is the requests they name; else it is
    the check on each request."""
    # The permission and the groups by their ids: along a subquery of them, PostgreSQL
    # could not tell how many grants a group holds, and read every grant.
    decide = _decide_permission().values_list("pk", flat=True).first()
    groups = list(get_user_model().groups.through.objects.filter(user_id=user.pk)
                  .values_list("group_id", flat=True))
    named = set()
    for granted in (ApprovalRequestGroupObjectPermission.objects.filter(group_id__in=groups),
                    ApprovalRequestUserObjectPermission.objects.filter(user=user)):
        named.update(granted.filter(permission_id=decide).order_by()
                     .values_list("content_object_id", flat=True)[:GRANTS_READ_AT_MOST + 1])
        if len(named) > GRANTS_READ_AT_MOST:
            return granted_on_each(user)
    return Q(pk__in=sorted(named))


def _decide_permission():
    """The decide permission's row, as a queryset."""
    return Permission.objects.filter(
        codename=DECIDE_CODENAME, content_type__app_label=ApprovalRequest._meta.app_label,
        content_type__model=ApprovalRequest._meta.model_name).order_by()


def granted_on_each(user, *, by_name: bool = True) -> Q:
    """The condition on approval requests that `user` holds the decide permission on the
    request as an object permission granted to one of their groups (and, with `by_name`,
    to them by name): guardian's check, as a query. Asked of each request the query
    reaches, through the object-permission tables' indexes on the request, so it costs what
    the requests read cost (the inbox reads the pending ones along their due time), not
    what a group was ever granted: a group is granted each request it is named on and keeps
    the grant once the request is decided, and a condition PostgreSQL may turn into a
    hashed subplan (EXISTS, IN) read every such grant to answer for a page of fifty. A
    scalar subquery is read per request, never hashed."""
    decide = Subquery(_decide_permission().values("pk")[:1])
    groups = get_user_model().groups.through.objects.filter(user_id=user.pk)
    grants = [ApprovalRequestGroupObjectPermission.objects.filter(
        group_id__in=groups.values("group_id"))]
    if by_name:
        grants.append(ApprovalRequestUserObjectPermission.objects.filter(user=user))
    held = Q()
    for granted in grants:
        on_request = granted.filter(content_object=OuterRef("pk"), permission=decide)
        held |= Q(Coalesce(Subquery(on_request.order_by().values(
            held=Value(True, output_field=BooleanField()))[:1]), Value(False),
            output_field=BooleanField()))
    return held


def reaching_only(*, workflow_names=None, workflow_ids=None) -> Q:
    """The condition on approval requests that every workflow a request reaches is among
    `workflow_names` (an API token's scope) or `workflow_ids` (a person's grant): its run's,
    and for a bulk job's request, those of every run the job handled. The request hangs
    on one of the job's runs only because a request belongs to a run; approving it acts on
    runs of other workflows too, so a scope holding the anchor's workflow alone would see
    and decide what it may not reach. The one rule the API's inbox and decisions and the
    approvers kept by their action's permission (still_approver_of) go by."""
    if (workflow_names is None) == (workflow_ids is None):
        raise TypeError("reaching_only takes workflow_names or workflow_ids")
    field, scope = (("workflow_name", workflow_names) if workflow_names is not None
                    else ("workflow_id", workflow_ids))
    # A run with no workflow row (workflow_id null) is outside any grant by id.
    outside = Run.objects.exclude(**{f"{field}__in": list(scope)})
    # The job's id is in the request's params (kept by a request that supersedes it),
    # and its outcome rows, once the request exists, name every run it handled.
    job_of_request = Cast(KeyTextTransform("bulk_job", OuterRef("params")), BigIntegerField())
    beyond = BulkOutcome.objects.filter(job_id=job_of_request).filter(
        Exists(outside.filter(pk=OuterRef("run_id"))))
    return Q(**{f"run__{field}__in": list(scope)}) & ~Exists(beyond)


def is_requester(user, approval: ApprovalRequest) -> bool:
    return approval.requested_by_id is not None and approval.requested_by_id == user.pk


def tool_call_requester(call) -> int | None:
    """The user id of whoever sent agent tool call `call` again as an operator
    (retry_tool_call) most recently, or None: the requester of its approval request. Read
    from the run's audit log, where each retry is recorded with its call and its actor."""
    user_id = retried_by(call)  # the rule decide_tool_call enforces for every caller
    if user_id is None or not get_user_model().objects.filter(pk=user_id).exists():
        return None
    return user_id


def step_requester(run_id: int, step_name: str) -> int | None:
    """The user id of the operator who sent the attempt that step `step_name` (one with the
    stop verdict) now waits to have approved, or None: the requester of its approval
    request."""
    user_id = step_sent_again_by(run_id, step_name)  # the rule decide_approval enforces
    if user_id is None or not get_user_model().objects.filter(pk=user_id).exists():
        return None
    return user_id


def can_decide(user, approval: ApprovalRequest) -> bool:
    """Whether `user` may decide `approval` (if it is still pending)."""
    return decide_refusal(user, approval) is None


def decide_refusal(user, approval: ApprovalRequest) -> str | None:
    """Why `user` may not decide `approval`, in words for them, or None if they may. The
    one text of the refusal: the console's page shows it, and approvals.decisions.decide
    raises it to every other caller (the API, the command line), so the requester is told
    it is four eyes wherever they try."""
    if is_requester(user, approval):
        return (f"You may not decide approval request {approval.pk}: you asked for what it "
                "is about, and four eyes means another person decides it, never the one "
                "who asked.")
    if not has_decide_permission(user, approval):
        return (f"You may not decide approval request {approval.pk}: it can be decided "
                "only by its approvers.")
    return None


def can_view(user, approval: ApprovalRequest) -> bool:
    """Approvers see the request; so does the operator who asked for the action."""
    if user is None or not user.is_authenticated:
        return False
    return has_decide_permission(user, approval) or is_requester(user, approval)
