# The metrics' count of runs not finished, from an index alone, built without blocking
# writes (see audit.migration_operations).

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0012_search_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(("status__in", ["queued", "running", "waiting", "attention",
                                                   "compensating", "compensation_failed"])),
                fields=["status", "workflow_name", "attention_reason"], name="run_open_idx"),
        ),
    ]
