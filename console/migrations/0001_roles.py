"""Create the role groups (console.roles)."""

from django.db import migrations

from console.roles import ROLES, ensure_roles


def create_roles(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally created after all migrations; the groups need them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, verbosity=0, apps=apps)
        app_config.models_module = None
    ensure_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


def remove_roles(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=ROLES).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("runs", "0005_approval_rejected"),
    ]
    operations = [migrations.RunPython(create_roles, remove_roles)]
