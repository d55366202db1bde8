"""The roles, as groups: operators act on runs, approvers decide approvals, auditors read,
admins administer. Per-workflow grants are guardian object permissions on top."""

ROLES = {
    "operators": ["view_runs", "resume_run", "reconcile_run", "retry_step", "compensate_run",
                  "terminate_run", "pause_dispatch"],
    "approvers": ["view_runs"],  # to see the run behind what they approve
    "auditors": ["view_runs"],
    "admins": ["view_runs", "resume_run", "reconcile_run", "retry_step", "compensate_run",
               "terminate_run", "pause_dispatch"],
}


def ensure_roles(group_model, permission_model) -> None:
    """Create the role groups with their permissions (idempotent). Takes the models so that
    a migration can pass its historical ones."""
    for name, codenames in ROLES.items():
        group, _ = group_model.objects.get_or_create(name=name)
        group.permissions.add(*permission_model.objects.filter(
            content_type__app_label="runs", codename__in=codenames))
