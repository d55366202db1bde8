# The approval steps runs wait on, for the approvals sweep, built without blocking writes
# (see audit.migration_operations).

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0013_run_open_idx"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="step",
            index=models.Index(condition=models.Q(("kind", "approval"), ("status", "waiting")),
                               fields=["run"], name="step_approval_waiting_idx"),
        ),
    ]
