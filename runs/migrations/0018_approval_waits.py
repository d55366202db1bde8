# The decisions runs wait on get a table of their own (runs.ApprovalWait): a row for each
# approval step and each agent tool call a waiting run waits on, written by the transitions
# that start and end the wait. The approvals sweep reads those few rows, so the partial
# indexes that named a status (waiting approval steps; unknown and waiting tool calls) go,
# and step and tool call updates are HOT again (in place, no index entries written).
#
# The new table is empty and new: creating it locks nothing that is in use. The backfill
# reads the waits of the moment through the partial index it then drops (a handful of rows).
# Both indexes are dropped without blocking writes (see audit.migration_operations).

import django.db.models.deletion
from django.db import migrations, models

from audit.migration_operations import RemoveIndexConcurrently


def backfill(apps, schema_editor):
    """A wait row for every approval step and tool call a waiting run waits on now: the
    question the approvals sweep asked of the steps until this migration."""
    Step = apps.get_model("runs", "Step")
    ToolCall = apps.get_model("runs", "ToolCall")
    ApprovalWait = apps.get_model("runs", "ApprovalWait")
    rows = [ApprovalWait(run_id=step.run_id, step_name=step.name, created_at=step.updated_at)
            for step in Step.objects.filter(kind="approval", status="waiting",
                                            run__status="waiting",
                                            name=models.F("run__current_step"))]
    rows += [ApprovalWait(run_id=call.step.run_id, step_name=call.step.name, tool_call=call,
                          created_at=call.updated_at)
             for call in ToolCall.objects.filter(status="waiting", step__status="waiting",
                                                 step__run__status="waiting")
             .select_related("step")]
    ApprovalWait.objects.bulk_create(rows)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0017_step_approval_waiting_idx_again"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApprovalWait",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True,
                                           serialize=False, verbose_name="ID")),
                ("step_name", models.CharField(max_length=200)),
                ("created_at", models.DateTimeField()),
                ("run", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE,
                                          related_name="approval_waits", to="runs.run")),
                ("tool_call", models.ForeignKey(blank=True, db_index=False, null=True,
                                                on_delete=django.db.models.deletion.CASCADE,
                                                related_name="+", to="runs.toolcall")),
            ],
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, atomic=True),
        RemoveIndexConcurrently(model_name="step", name="step_approval_waiting_idx"),
        RemoveIndexConcurrently(model_name="toolcall", name="toolcall_unsettled_idx"),
    ]
