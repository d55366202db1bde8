"""Who may decide an approval request: the project's one permission rule, applied to
approval requests.

Allowed if the user is a superuser, or holds the global permission
`approvals.decide_approvalrequest`, or holds it on this request as a django-guardian object
permission (granted to the user or to one of their groups when the request is made or
escalated). Guardian does not treat a global permission as satisfying an object check,
hence the explicit order. Four eyes: whoever asked for an operator action never decides it,
whatever else they hold.
"""

from .models import DECIDE_PERMISSION, ApprovalRequest


def has_decide_permission(user, approval: ApprovalRequest) -> bool:
    """The permission rule alone, without the four-eyes exclusion."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    if user.is_superuser or user.has_perm(DECIDE_PERMISSION):
        return True
    return user.has_perm(DECIDE_PERMISSION, approval)


def is_requester(user, approval: ApprovalRequest) -> bool:
    return approval.requested_by_id is not None and approval.requested_by_id == user.pk


def can_decide(user, approval: ApprovalRequest) -> bool:
    """Whether `user` may decide `approval` (if it is still pending)."""
    return has_decide_permission(user, approval) and not is_requester(user, approval)


def can_view(user, approval: ApprovalRequest) -> bool:
    """Approvers see the request; so does the operator who asked for the action."""
    if user is None or not user.is_authenticated:
        return False
    return has_decide_permission(user, approval) or is_requester(user, approval)
