# The admin's lists of approval requests and of the outbox filter by status and by kind,
# newest first: a value few rows have (an expired request, a failed notification, an
# escalation) was found by reading the whole table. An index per filter, (value, id), answers
# each from its own rows. Built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("approvals", "0005_approval_open_call_idx"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="approvalrequest",
            index=models.Index(fields=["status", "id"], name="approval_status_idx"),
        ),
        AddIndexConcurrently(
            model_name="approvalrequest",
            index=models.Index(fields=["kind", "id"], name="approval_kind_idx"),
        ),
        AddIndexConcurrently(
            model_name="notification",
            index=models.Index(fields=["status", "id"], name="notification_status_idx"),
        ),
        AddIndexConcurrently(
            model_name="notification",
            index=models.Index(fields=["kind", "id"], name="notification_kind_idx"),
        ),
    ]
