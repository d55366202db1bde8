# An event sent again under a new id is compared with the events runs took under the same
# wait's reference (runs.waiting.events: answered duplicate, not kept for the next run under
# the key): an index of the taken rows by that reference. Built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0060_sealed_value_unreadable"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="externalevent",
            index=models.Index(condition=models.Q(("consumed_at__isnull", False)),
                               fields=["awaited_ref", "workflow_name"],
                               name="external_event_taken_ref_idx"),
        ),
    ]
