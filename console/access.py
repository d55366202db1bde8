"""Who may do what, at a glance, and the audited ways admins change it.

The reads put together what the one permission rule (console.permissions) consults, for one
workflow or one user: superuser status, global permissions held directly or through a group,
and guardian's object permissions on the workflow's row, directly or through a group; plus
who may approve (the approvers each approval step or tool names, and holders of the global
decide permission) and who may decide a four-eyes request. Each read is a fixed number of
queries, whatever the number of users, groups and workflows.

The writes (a role granted or revoked on a workflow, a user's staff or superuser status,
groups and global permissions, a group's permissions, guardian's object-permission forms)
each append to the access chain (audit.access) in the transaction of the change.
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import transaction
from django.db.models import Q
from guardian.models import (
    BaseGenericObjectPermission,
    GroupObjectPermission,
    GroupObjectPermissionBase,
    UserObjectPermission,
    UserObjectPermissionBase,
)
from guardian.shortcuts import assign_perm, remove_perm

from approvals.models import DECIDE_CODENAME
from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from runs.definitions import definition
from runs.models import Workflow
from runs.operator.actions import ACTIONS

from .permissions import VIEW, grants_of
from .roles import ROLES

# --- who may do what ------------------------------------------------------------------------


@dataclass(frozen=True)
class Holder:
    """One way someone holds a capability: "superuser", "user" or "group" (with its active
    members), and where: "global", "this workflow", or "named by <step>"."""

    kind: str
    name: str
    scope: str
    members: tuple[str, ...] = ()


@dataclass
class Capability:
    label: str
    permission: str
    holders: list[Holder] = field(default_factory=list)
    note: str = ""


def capabilities() -> list[tuple[str, str]]:
    """(label, runs codename) of everything done on a workflow's runs: view, and each
    operator action of runs.operator.actions.ACTIONS."""
    return [("view runs", VIEW)] + [(f"{a.label} ({a.name})", a.permission)
                                    for a in ACTIONS.values()]


@dataclass(frozen=True)
class Grants:
    """Every grant of the permissions that matter, read once."""

    superusers: tuple[str, ...]
    # codename -> usernames / group names holding it globally
    user_global: dict[str, set[str]]
    group_global: dict[str, set[str]]
    # (workflow id, codename) -> usernames / group names holding it on that row
    user_object: dict[tuple[int, str], set[str]]
    group_object: dict[tuple[int, str], set[str]]
    members: dict[str, tuple[str, ...]]


def read_grants(*, workflow_ids: Iterable[int] | None = None) -> Grants:
    """The grants, for the workflows `workflow_ids` (None: all of them): seven queries."""
    users = get_user_model()
    codenames = {c for _, c in capabilities()}
    perms = list(Permission.objects.filter(
        content_type__app_label="runs", codename__in=codenames)) + list(
        Permission.objects.filter(content_type__app_label="approvals",
                                  codename=DECIDE_CODENAME))
    superusers = tuple(users.objects.filter(is_superuser=True, is_active=True)
                       .order_by("username").values_list("username", flat=True))
    user_global, group_global = defaultdict(set), defaultdict(set)
    for codename, name in users.user_permissions.through.objects.filter(
            permission__in=perms, user__is_active=True).values_list(
            "permission__codename", "user__username"):
        user_global[codename].add(name)
    for codename, name in Group.permissions.through.objects.filter(
            permission__in=perms).values_list("permission__codename", "group__name"):
        group_global[codename].add(name)
    content_type = ContentType.objects.get_for_model(Workflow)
    user_object, group_object = defaultdict(set), defaultdict(set)
    scope = {"content_type": content_type}
    if workflow_ids is not None:
        scope["object_pk__in"] = [str(pk) for pk in workflow_ids]
    for pk, codename, name in UserObjectPermission.objects.filter(
            **scope, user__is_active=True).values_list(
            "object_pk", "permission__codename", "user__username"):
        user_object[(int(pk), codename)].add(name)
    for pk, codename, name in GroupObjectPermission.objects.filter(**scope).values_list(
            "object_pk", "permission__codename", "group__name"):
        group_object[(int(pk), codename)].add(name)
    members = defaultdict(list)
    for group, name in users.groups.through.objects.filter(user__is_active=True).order_by(
            "user__username").values_list("group__name", "user__username"):
        members[group].append(name)
    return Grants(superusers, user_global, group_global, user_object, group_object,
                  {g: tuple(n) for g, n in members.items()})


def _named(names: Iterable[str], scope: str, grants: Grants) -> list[Holder]:
    """Holders for approvers named as "user:ann" / "group:finance"."""
    holders = []
    for who in names:
        kind, _, name = who.partition(":")
        holders.append(Holder(kind, name, scope, grants.members.get(name, ())
                              if kind == "group" else ()))
    return holders


def _global_and_super(codename: str, grants: Grants) -> list[Holder]:
    return ([Holder("superuser", n, "global") for n in grants.superusers]
            + [Holder("user", n, "global") for n in sorted(grants.user_global[codename])]
            + [Holder("group", n, "global", grants.members.get(n, ()))
               for n in sorted(grants.group_global[codename])])


def approval_policies(workflow_name: str) -> list[tuple[str, definition.ApprovalPolicy]]:
    """(what asks, its policy) for each approval step, agent and tool of the workflow's
    latest version that names approvers."""
    spec = definition.registry.latest(workflow_name)
    found = []
    for step in spec.steps if spec else []:
        if step.approval is not None:
            found.append((f"step {step.name}", step.approval))
        for tool in getattr(step, "tools", {}).values():
            if tool.approval is not None:
                found.append((f"tool {step.name}.{tool.name}", tool.approval))
    return found


def workflow_access(workflow: Workflow) -> list[Capability]:
    """Who may view runs of `workflow`, use each operator action on them, approve its
    approval steps and tool calls, and decide a four-eyes request."""
    grants = read_grants(workflow_ids=[workflow.pk])
    rows = []
    for label, codename in capabilities():
        holders = _global_and_super(codename, grants)
        holders += [Holder("user", n, "this workflow")
                    for n in sorted(grants.user_object[(workflow.pk, codename)])]
        holders += [Holder("group", n, "this workflow", grants.members.get(n, ()))
                    for n in sorted(grants.group_object[(workflow.pk, codename)])]
        rows.append(Capability(label, f"runs.{codename}", holders))
    decide = _global_and_super(DECIDE_CODENAME, grants)
    for what, policy in approval_policies(workflow.name):
        rows.append(Capability(
            f"approve: {what}", f"approvals.{DECIDE_CODENAME}",
            decide + _named(policy.approvers, "named approver", grants)
            + _named(policy.escalate_to, "deputy once escalated", grants)))
    rows.append(Capability(
        "decide a four-eyes request", f"approvals.{DECIDE_CODENAME}",
        decide + _named(settings.APPROVALS_FOUR_EYES_APPROVERS, "four-eyes approver", grants),
        note="Never the operator who asked for the action."))
    return rows


@dataclass(frozen=True)
class UserCapability:
    workflow: str
    label: str
    through: tuple[str, ...]


def user_access(user) -> list[UserCapability]:
    """What `user` may do on each workflow, and through what (superuser status, a global
    permission held directly or through a group, an object permission on the workflow)."""
    if not user.is_active:
        return []
    grants = read_grants()
    groups = {g for g, names in grants.members.items() if user.username in names}

    def sources(codename: str, pk: int | None) -> list[str]:
        found = ["superuser"] if user.is_superuser else []
        if user.username in grants.user_global[codename]:
            found.append("global permission")
        found += [f"global, group {g}" for g in sorted(groups & grants.group_global[codename])]
        if pk is not None:
            if user.username in grants.user_object[(pk, codename)]:
                found.append("on this workflow")
            found += [f"on this workflow, group {g}"
                      for g in sorted(groups & grants.group_object[(pk, codename)])]
        return found

    def named(names: Iterable[str]) -> list[str]:
        found = []
        for who in names:
            kind, _, name = who.partition(":")
            if (kind, name) == ("user", user.username) or (kind == "group" and name in groups):
                found.append(f"named ({who})")
        return found

    rows = []
    for workflow in Workflow.objects.order_by("name"):
        for label, codename in capabilities():
            if through := sources(codename, workflow.pk):
                rows.append(UserCapability(workflow.name, label, tuple(through)))
        decide = sources(DECIDE_CODENAME, None)
        for what, policy in approval_policies(workflow.name):
            if through := decide + named(policy.approvers) + named(policy.escalate_to):
                rows.append(UserCapability(workflow.name, f"approve: {what}", tuple(through)))
        if through := decide + named(settings.APPROVALS_FOUR_EYES_APPROVERS):
            rows.append(UserCapability(workflow.name, "decide a four-eyes request",
                                       tuple(through)))
    return rows


# --- audited changes ------------------------------------------------------------------------


def object_permissions(holder, workflow: Workflow) -> list[str]:
    """The codenames `holder` (a user or a group) holds on `workflow`'s row itself."""
    objects = (GroupObjectPermission if isinstance(holder, Group) else UserObjectPermission)
    key = "group" if isinstance(holder, Group) else "user"
    return sorted(objects.objects.filter(
        **{key: holder}, content_type=ContentType.objects.get_for_model(Workflow),
        object_pk=str(workflow.pk)).values_list("permission__codename", flat=True))


def holder_label(holder) -> str:
    return f"group {holder.name}" if isinstance(holder, Group) else \
        f"user {holder.get_username()}"


def record_object_permissions(*, holder, obj, before: Iterable[str], after: Iterable[str],
                              by, reason: str = "") -> None:
    """Append a change of `holder`'s object permissions on `obj` to the access chain: a
    grant when any was added, a revocation when any was removed."""
    before, after = sorted(set(before)), sorted(set(after))
    subject = f"{holder_label(holder)} on {obj._meta.verbose_name} {obj}"
    for action, happened in ((AccessAction.OBJECT_PERMISSION_GRANTED, set(after) - set(before)),
                             (AccessAction.OBJECT_PERMISSION_REVOKED, set(before) - set(after))):
        if happened:
            record_access_change(action=action, subject=subject, actor=Actor.for_user(by),
                                 before={"permissions": before}, after={"permissions": after},
                                 reason=reason)


def lock_access(obj) -> None:
    """Take `obj`'s row (a workflow's) for this transaction: every change of who may do what
    on it takes it first (change_role, guardian's object-permission pages in admin), so
    each reads the permissions it changes, and records them, as the one before it left
    them."""
    type(obj)._default_manager.select_for_update().filter(pk=obj.pk).first()


class RoleError(ValueError):
    """The role change asked for is incomplete or unknown; nothing was changed."""


def change_role(*, workflow: Workflow, role: str, grant: bool, by, user=None, group=None,
                reason: str = "") -> bool:
    """Grant or revoke `role` (console.roles.ROLES) on `workflow` for a user or a group, as
    guardian object permissions on the workflow's row, and record it in the access chain.
    Object permissions do not remember which role gave them: revoking a role removes all of
    its permissions, those it shares with another role included (the access page shows
    what remains). Returns whether anything changed."""
    if role not in ROLES:
        raise RoleError(f"unknown role {role!r}; the roles are {', '.join(ROLES)}")
    if (user is None) == (group is None):
        raise RoleError("name either a user or a group")
    if grant and (beyond := rights_beyond(by, workflow, ROLES[role])):
        raise RoleError(f"you may grant on {workflow.name} only rights you hold there "
                        f"yourself; you do not hold {', '.join(beyond)}, which role {role} "
                        "gives: nothing was changed")
    holder = user if user is not None else group
    with transaction.atomic():
        lock_access(workflow)
        before = object_permissions(holder, workflow)
        if grant:
            for codename in ROLES[role]:
                assign_perm(f"runs.{codename}", holder, workflow)
        else:
            for codename in ROLES[role]:
                remove_perm(f"runs.{codename}", holder, workflow)
        after = object_permissions(holder, workflow)
        if before == after:
            return False
        record_object_permissions(holder=holder, obj=workflow, before=before, after=after,
                                  by=by, reason=reason or f"role {role} "
                                  f"{'granted' if grant else 'revoked'}")
    return True


def rights_beyond(by, workflow: Workflow, codenames: Iterable[str]) -> list[str]:
    """Of `codenames` (permissions on workflows), those `by` does not hold on `workflow`
    (the one permission rule: superuser, global, or object permission there): what they
    may not grant on it. The role form and guardian's object-permission forms need only
    the permission to change workflow rows, which says who may manage access, not how
    much: without this rule, staff holding it, and no right on any run, gave themselves
    (or a group they are in) the operators' role on every workflow. As with users' rights
    (may_edit_user) and API tokens' workflows, a person gives only what they hold."""
    grants = grants_of(by)
    return sorted({c for c in codenames if not grants(c).covers(workflow.pk)})


def rights_held(user) -> frozenset:
    """Every right `user` holds, whether or not they are active (an editor of users can
    activate them): superuser status, each global permission held directly or through a
    group, each guardian object permission held directly or through a group, in guardian's
    generic tables and in those with a real foreign key (approvals' requests). A fixed number
    of queries, one per table."""
    held = {("superuser",)} if user.is_superuser else set()
    held.update(("global", app, codename) for app, codename in Permission.objects.filter(
        Q(user=user) | Q(group__user=user)).values_list("content_type__app_label", "codename"))
    for model in apps.get_models():
        if issubclass(model, UserObjectPermissionBase):
            rows = model.objects.filter(user=user)
        elif issubclass(model, GroupObjectPermissionBase):
            rows = model.objects.filter(group__user=user)
        else:
            continue
        if issubclass(model, BaseGenericObjectPermission):
            held.update(("object", type_id, pk, codename) for type_id, pk, codename in
                        rows.values_list("content_type_id", "object_pk", "permission__codename"))
        else:
            target = ContentType.objects.get_for_model(
                model._meta.get_field("content_object").related_model)
            held.update(("object", target.pk, str(pk), codename) for pk, codename in
                        rows.values_list("content_object_id", "permission__codename"))
    return frozenset(held)


def may_edit_user(editor, user) -> bool:
    """Whether `editor` may change `user`'s account (name, address, active state, password)
    or delete it: a superuser may change anyone; anyone else only a user who holds no right
    the editor lacks. Setting a user's password is signing in as them: an editor allowed to
    set the password of a superuser, or of an operator holding a right they lack, would hold
    that right a form away."""
    if editor.is_superuser or editor.pk == user.pk:
        return True
    return rights_held(user) <= rights_held(editor)


def user_audit_state(user) -> dict:
    """What a user's own row says about their access (never their password)."""
    if user is None or user.pk is None:
        # No account on this side (made, or deleted): whether it is active is not a change
        # of its own, the rest of its state is.
        return {"is_active": None, "is_staff": False, "is_superuser": False, "groups": [],
                "permissions": []}
    return {
        "is_active": user.is_active, "is_staff": user.is_staff,
        "is_superuser": user.is_superuser,
        "groups": sorted(user.groups.values_list("name", flat=True)),
        "permissions": sorted(f"{a}.{c}" for a, c in user.user_permissions.values_list(
            "content_type__app_label", "codename")),
    }


USER_CHANGES = [
    ("is_active", AccessAction.ACCOUNT_ACTIVE_CHANGED),
    ("is_staff", AccessAction.STAFF_STATUS_CHANGED),
    ("is_superuser", AccessAction.SUPERUSER_STATUS_CHANGED),
    ("groups", AccessAction.GROUP_MEMBERSHIP_CHANGED),
    ("permissions", AccessAction.GLOBAL_PERMISSIONS_CHANGED),
    # Not in user_audit_state: only the change-password page says it (password_audit_state).
    ("password", AccessAction.PASSWORD_CHANGED),
]


def password_audit_state(user, *, changed: bool) -> dict:
    """What the access chain says of a user's password: whether it lets them sign in, and,
    once changed, that it is a new one. Never the password, nor its hash."""
    if not user.has_usable_password():
        return {"password": "unusable"}
    return {"password": "new" if changed else "usable"}


def record_user_changes(*, user, before: dict, after: dict, by, reason: str = "") -> int:
    """One access record for each part of a user's access that changed; how many."""
    written = 0
    for key, action in USER_CHANGES:
        if before.get(key) != after.get(key) and None not in (before.get(key), after.get(key)):
            record_access_change(action=action, subject=f"user {user.get_username()}",
                                 actor=Actor.for_user(by), before={key: before[key]},
                                 after={key: after[key]}, reason=reason)
            written += 1
    return written


def group_permissions(group) -> list[str]:
    if group is None or group.pk is None:
        return []
    return sorted(f"{a}.{c}" for a, c in group.permissions.values_list(
        "content_type__app_label", "codename"))


def record_group_permissions(*, group, before: list[str], after: list[str], by,
                             reason: str = "") -> None:
    if before != after:
        record_access_change(action=AccessAction.GLOBAL_PERMISSIONS_CHANGED,
                             subject=f"group {group.name}", actor=Actor.for_user(by),
                             before={"permissions": before}, after={"permissions": after},
                             reason=reason)
