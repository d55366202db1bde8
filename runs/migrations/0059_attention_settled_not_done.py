# A run whose unknown outcome a person (or a lookup they ran) settled as not done no longer
# says its outcome is unknown (runs.machine.transitions.operator.reconcile): its reason is
# settled_not_done. Runs held so before are given that reason here: in attention for an
# unknown outcome, with a step settled as not done and none unknown. The prefix of that
# step's message is written out: a migration keeps the values of its time.

from django.db import migrations, models

SETTLED_NOT_DONE = "settled as not done: "
CHUNK = 500


def relabel(apps, schema_editor):
    alias = schema_editor.connection.alias
    runs = apps.get_model("runs", "Run").objects.using(alias)
    steps = apps.get_model("runs", "Step").objects.using(alias)
    held = list(runs.filter(status="attention", attention_reason="unknown_outcome")
                .values_list("pk", flat=True))
    for start in range(0, len(held), CHUNK):
        some = steps.filter(run_id__in=held[start:start + CHUNK])
        settled = set(some.filter(status="failed", error_message__startswith=SETTLED_NOT_DONE)
                      .values_list("run_id", flat=True))
        unknown = set(some.filter(status="unknown").values_list("run_id", flat=True))
        runs.filter(pk__in=settled - unknown, status="attention",
                    attention_reason="unknown_outcome").update(
            attention_reason="settled_not_done")


def unlabel(apps, schema_editor):
    apps.get_model("runs", "Run").objects.using(schema_editor.connection.alias).filter(
        attention_reason="settled_not_done").update(attention_reason="unknown_outcome")


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0058_agentturn_sealed_content'),
    ]

    operations = [
        migrations.AlterField(
            model_name='run',
            name='attention_reason',
            field=models.CharField(blank=True, choices=[('unknown_outcome', 'unknown outcome not settled'), ('permanent_error', 'permanent error'), ('budget_exhausted', 'retry budget exhausted'), ('model_output_paused', 'model output paused'), ('unclassified_error', 'unexpected error'), ('approval_timed_out', 'approval timed out'), ('approval_rejected', 'approval rejected'), ('definition_missing', 'definition missing'), ('compensation_failed', 'compensation failed'), ('reopened', 'reopened by an operator'), ('compensation_paused', 'undo of a high-impact step needs a person'), ('event_timed_out', 'awaited event did not arrive in time'), ('ended_unsettled', 'ended with an effect not settled'), ('workers_keep_stopping', 'workers keep stopping at this point'), ('input_rejected', 'input no longer accepted by its workflow version'), ('approval_unaskable', 'approval request cannot be made'), ('settled_not_done', 'effect settled as not done')], max_length=32),
        ),
        migrations.RunPython(relabel, unlabel),
    ]
