# The admin's list of archived runs filters by final status, newest first: the compensated
# and the terminated runs, a few among the completed ones, were found by reading every
# tombstone. Built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("archive", "0003_removal_audit_actions"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="archivedrun",
            index=models.Index(fields=["final_status", "id"], name="archivedrun_status_idx"),
        ),
    ]
