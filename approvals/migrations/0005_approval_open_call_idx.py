# A tool call's open request found by its call along a partial index (the approvals sweep
# asks it of each new wait of a tool call), built without blocking writes (see
# audit.migration_operations).

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("approvals", "0004_bulk_job_start_key"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="approvalrequest",
            index=models.Index(
                condition=models.Q(("settled_at__isnull", True), ("tool_call__isnull", False)),
                fields=["tool_call"], name="approval_open_call_idx"),
        ),
    ]
