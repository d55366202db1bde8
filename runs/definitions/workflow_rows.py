"""A Workflow row for every registered workflow, made when the database is migrated.

A row is what per-workflow grants attach to (guardian's object permissions: runs.permissions)
and what a run points at. A run's start makes its workflow's row when there is none, so on a
new installation a workflow had no row until its first run: an admin could not give anyone
a role on it, and the admin's list of workflows was empty. Django makes the permissions of
new models after `migrate` the same way (post_migrate); here, after every `migrate`, each
workflow the code registers (RUNS_WORKFLOW_MODULES) gets its row if it has none. Rows of
workflows a release removed stay: their runs and grants point at them.
"""

from django.apps import apps as global_apps
from django.db import DEFAULT_DB_ALIAS, router

from .registry import registry


def ensure_workflow_rows(workflow_model, *, using: str = DEFAULT_DB_ALIAS) -> int:
    """Make the missing rows of the registered workflows, with `workflow_model` (the
    current model, or a migration state's); how many were made."""
    names = registry.names()
    have = set(workflow_model.objects.using(using).filter(name__in=names)
               .values_list("name", flat=True))
    missing = [workflow_model(name=name) for name in names if name not in have]
    # A start making the same row meanwhile is no conflict: it stays, once.
    workflow_model.objects.using(using).bulk_create(missing, ignore_conflicts=True)
    return len(missing)


def after_migrate(sender, *, apps=global_apps, using: str = DEFAULT_DB_ALIAS,
                  **kwargs) -> None:
    """post_migrate's receiver: the rows, once the runs app's tables exist in `apps` (the
    migrated state; `flush` sends none: the models as they are)."""
    try:
        workflow_model = apps.get_model("runs", "Workflow")
    except LookupError:  # migrated back before the table
        return
    if router.allow_migrate_model(using, workflow_model):
        ensure_workflow_rows(workflow_model, using=using)
