"""The one permission rule on runs, in the two shapes its callers need.

Allowed if the user is a superuser, or holds the global permission (through a group such as
operators), or holds the object permission on the run's workflow row (django-guardian), so
that finance operators can act on invoice runs only. Guardian does not let a global
permission satisfy an object check and has no inheritance, hence this module; the legacy
global-permission flags of guardian stay unset.

grant_for answers for every workflow at once (list pages check each row without a query per
row); run_access answers for one run in one query, which is what an operator action needs
(tests/runs/test_permissions.py checks both shapes give the same answer).
"""

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache, partial

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db.models import CharField, Exists, OuterRef, Q
from django.db.models.functions import Cast
from guardian.models import GroupObjectPermission, UserObjectPermission
from guardian.shortcuts import get_objects_for_user

from .models import Run, Workflow

# The codename to see runs; each operator action names its own in runs.operator.actions.
VIEW = "view_runs"


@dataclass(frozen=True)
class Grant:
    """Which workflows a user may do one thing on: all of them, or these ids."""

    everywhere: bool
    workflow_ids: frozenset[int]

    def covers(self, workflow_id: int) -> bool:
        return self.everywhere or workflow_id in self.workflow_ids


def grant_for(user, codename: str) -> Grant:
    """What `user` may do with `codename`, computed once (two queries at most), so a list
    page checks every row without a query per row."""
    if not user.is_authenticated or not user.is_active:
        return Grant(False, frozenset())
    if user.is_superuser or user.has_perm(f"runs.{codename}"):
        return Grant(True, frozenset())
    objects = get_objects_for_user(user, f"runs.{codename}", klass=Workflow,
                                   accept_global_perms=False, with_superuser=False)
    return Grant(False, frozenset(objects.values_list("pk", flat=True)))


def grants_of(user) -> Callable[[str], Grant]:
    """grant_for of `user`, asked once per codename however often it is called: the operator
    actions share a few permissions, and what a run offers is checked action by action."""
    return lru_cache(maxsize=None)(partial(grant_for, user))


@dataclass(frozen=True)
class RunAccess:
    """One run as a permission check sees it: whether `user` may, and the run's chain head
    (what a page that showed the run has seen). `run`: the run's row, locked, when the check
    was asked to lock it."""

    run_id: int
    workflow_id: int
    audit_seq: int
    allowed: bool
    run: Run | None = None
    # Refused because the account is no longer active, whatever it holds: told as such,
    # not as a permission missing.
    account_inactive: bool = False


def run_access(user, codename: str, run_id: int, *, lock: bool = False) -> RunAccess | None:
    """Whether `user` may do `codename` on run `run_id` (None: no such run), in one query:
    the same rule as grant_for, asked of one run's workflow. `lock`: the same query also
    locks the run's row (SELECT ... FOR UPDATE, in the caller's transaction) and returns it,
    so a caller that goes on to change the run checks and locks in one statement.

    The account's state (active, superuser) is read by that statement too, not from `user`:
    the object is as old as whoever holds it (a bulk job's worker acts on a batch of runs
    with one), and an account deactivated, or its superuser status taken away, since it was
    read must be refused from the next action on, as a permission taken away is."""
    runs = Run.objects.filter(pk=run_id)
    if not user.is_authenticated:
        held = ()
    else:
        perm = Q(permission__codename=codename, permission__content_type__app_label="runs")
        workflow_row = Q(content_type__app_label="runs", content_type__model="workflow",
                         object_pk=Cast(OuterRef("workflow_id"), CharField()))
        person = get_user_model().objects.filter(pk=user.pk, is_active=True)
        annotations = {
            "account_active": Exists(person),
            "account_superuser": Exists(person.filter(is_superuser=True)),
            "held_globally": Exists(Permission.objects.filter(
                Q(user=user) | Q(group__user=user), codename=codename,
                content_type__app_label="runs")),
            "held_by_user": Exists(UserObjectPermission.objects.filter(
                perm, workflow_row, user=user)),
            "held_by_group": Exists(GroupObjectPermission.objects.filter(
                perm, workflow_row, group__user=user)),
        }
        runs = runs.annotate(**annotations)
        held = tuple(annotations)
    if lock:
        run = runs.select_for_update().first()
        if run is None:
            return None
        return _access(run_id, run.workflow_id, run.audit_seq,
                       [getattr(run, h) for h in held], run=run)
    row = runs.values_list("workflow_id", "audit_seq", *held).first()
    if row is None:
        return None
    return _access(run_id, row[0], row[1], row[2:])


def _access(run_id: int, workflow_id: int, audit_seq: int, answers, *,
            run: Run | None = None) -> RunAccess:
    """The rule, of run_access's answers (none for a visitor who is not signed in, the
    account's being active first): an active account that is a superuser or holds the
    permission in one of the three ways."""
    inactive = bool(answers) and not answers[0]
    allowed = bool(answers) and not inactive and any(answers[1:])
    return RunAccess(run_id, workflow_id, audit_seq, allowed, run=run,
                     account_inactive=inactive)
