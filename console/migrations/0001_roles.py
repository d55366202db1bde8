"""The roles, as groups: operators act on runs, approvers decide approvals, auditors read,
admins administer (Django admin). Per-workflow grants are object permissions added later."""

from django.db import migrations

ROLES = {
    "operators": ["view_runs", "resume_run", "reconcile_run", "retry_step", "compensate_run",
                  "terminate_run"],
    "approvers": [],
    "auditors": ["view_runs"],
    "admins": ["view_runs", "resume_run", "reconcile_run", "retry_step", "compensate_run",
               "terminate_run"],
}


def create_roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations; the groups need them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*Permission.objects.filter(
            content_type__app_label="runs", codename__in=codenames))


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("runs", "0005_approval_rejected"),
    ]
    operations = [migrations.RunPython(create_roles, remove_roles)]
