# The attention list without drill runs (runs 0025) read from an index alone, as
# run_attention_keyset_idx serves it with them; built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0025_run_drill"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(("drill", False),
                                   ("status__in", ["attention", "compensation_failed"])),
                fields=["updated_at", "id"], name="run_attention_live_idx"),
        ),
    ]
