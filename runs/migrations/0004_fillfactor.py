"""Leave room in each page of runs and steps so that PostgreSQL can update a row in place
(a HOT update, no index writes) when a step's progress changes no indexed column: the
executor updates a run row and its step rows at every step."""

from django.db import migrations


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE runs_run SET (fillfactor = 70)")
        schema_editor.execute("ALTER TABLE runs_step SET (fillfactor = 80)")


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("ALTER TABLE runs_run RESET (fillfactor)")
        schema_editor.execute("ALTER TABLE runs_step RESET (fillfactor)")


class Migration(migrations.Migration):
    dependencies = [("runs", "0003_lean_indexes")]
    operations = [migrations.RunPython(forwards, backwards)]
