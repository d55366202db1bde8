# The sweeper's pass over kept events (runs.waiting.events.consumable_kept) reads them in id
# order, batch after batch, from an index that holds only the unconsumed rows: its cost
# follows the events kept, not every event ever received. Built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0039_attention_approval_unaskable"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="externalevent",
            index=models.Index(condition=models.Q(("consumed_at__isnull", True)),
                               fields=["id"], name="external_event_kept_order_idx"),
        ),
    ]
