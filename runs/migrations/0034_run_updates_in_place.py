# Each step's checkpoint updates its run (the audit chain's head, the step reached, the
# lease extended). run_lease_held_idx (on lease_expires_at) and run_current_step_idx (on
# current_step) named columns that change at every step, so no such update was HOT: every
# index of runs_run got a new entry per step, about 650 bytes of WAL. The held runs are found
# by a partial index on id instead; the runs list sorted by current step sorts the runs it
# filtered (runs.reads.selectors). Built and dropped without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently, RemoveIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0033_attempt_started_at"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(condition=models.Q(("status__in", ["running", "compensating"])),
                               fields=["id"], name="run_held_idx"),
        ),
        RemoveIndexConcurrently(model_name="run", name="run_lease_held_idx"),
        RemoveIndexConcurrently(model_name="run", name="run_current_step_idx"),
    ]
