# Step rows updated in place again: no index of runs_step may involve a column a step's
# progress changes (status above all), or PostgreSQL cannot make a step's update a HOT
# update and writes a new entry into every index of the table at every checkpoint. The
# approvals sweep finds the approval steps runs wait on from the waiting runs instead
# (an index on run status), so the partial index on waiting approval steps goes, without blocking
# writes (see audit.migration_operations).

from django.db import migrations

from audit.migration_operations import RemoveIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0015_agent_turns_and_tool_calls"),
    ]

    operations = [
        RemoveIndexConcurrently(model_name="step", name="step_approval_waiting_idx"),
    ]
