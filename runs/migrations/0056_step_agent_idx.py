# The agent metrics find the agent steps of the open and recently finished runs along this
# index (a few entries a run, none for other steps) instead of reading every tool call and
# turn and the run of each. Built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0055_external_event_payload_mac"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="step",
            index=models.Index(condition=models.Q(("kind", "agent")), fields=["run", "id"],
                               name="step_agent_idx"),
        ),
    ]
