# The open runs' counts of the metrics leave drill runs out (a drill breaks runs on purpose:
# they must not page anyone), still from one index alone: run_open_idx again, with drill
# runs outside its condition. Built before the old one is dropped, without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently, RemoveIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0050_external_event_payload_digest"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(("drill", False),
                                   ("status__in", ["queued", "running", "waiting", "attention",
                                                   "compensating", "compensation_failed"])),
                fields=["status", "workflow_name", "attention_reason"],
                name="run_open_work_idx"),
        ),
        RemoveIndexConcurrently(model_name="run", name="run_open_idx"),
    ]
