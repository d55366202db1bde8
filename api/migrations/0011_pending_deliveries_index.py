# The admin lists pending webhook deliveries newest first; a partial index holds exactly
# those in the order of their ids, so a page reads its rows and not the whole backlog (a
# receiver down for a day leaves one delivery per event pending). Built without blocking
# writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("api", "0010_queued_through"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="webhookdelivery",
            index=models.Index(condition=models.Q(("status", "pending")), fields=["id"],
                               name="webhook_pending_idx"),
        ),
    ]
