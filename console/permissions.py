"""The one permission rule of the console, and its prefetch for list pages.

Allowed if the user is a superuser, or holds the global permission (through a group such as
operators), or holds the object permission on the run's workflow row (django-guardian), so
that finance operators can act on invoice runs only. Guardian does not let a global
permission satisfy an object check and has no inheritance, hence this function; the legacy
global-permission flags of guardian stay unset.
"""

from dataclasses import dataclass

from guardian.shortcuts import get_objects_for_user

from runs.models import Workflow

# The codename to see runs; each operator action names its own in runs.actions.
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
