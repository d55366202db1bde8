"""Approvers may see the runs behind the requests they decide."""

from django.db import migrations

from console.roles import ensure_roles


def forwards(apps, schema_editor):
    ensure_roles(apps.get_model("auth", "Group"), apps.get_model("auth", "Permission"))


class Migration(migrations.Migration):
    dependencies = [("console", "0001_roles")]
    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
