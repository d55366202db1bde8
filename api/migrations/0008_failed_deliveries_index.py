# The metrics count failed webhook deliveries at every scrape; a partial index holds exactly
# those, so the count reads them and not every delivery. Built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("api", "0007_deliveries_protect_their_subscriber"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="webhookdelivery",
            index=models.Index(condition=models.Q(("status", "failed")), fields=["id"],
                               name="webhook_failed_idx"),
        ),
    ]
