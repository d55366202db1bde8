# The attention reason sealed_value_unreadable and the error class unreadable
# (runs.models): the choices of the run's and the step's columns only, no change to the
# tables (a tool call's error_class has no choices). Runs held before this for a value that
# could not be opened keep the reason and the step status they were given then.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0059_attention_settled_not_done'),
    ]

    operations = [
        migrations.AlterField(
            model_name='run',
            name='attention_reason',
            field=models.CharField(blank=True, choices=[('unknown_outcome', 'unknown outcome not settled'), ('permanent_error', 'permanent error'), ('budget_exhausted', 'retry budget exhausted'), ('model_output_paused', 'model output paused'), ('unclassified_error', 'unexpected error'), ('approval_timed_out', 'approval timed out'), ('approval_rejected', 'approval rejected'), ('definition_missing', 'definition missing'), ('compensation_failed', 'compensation failed'), ('reopened', 'reopened by an operator'), ('compensation_paused', 'undo of a high-impact step needs a person'), ('event_timed_out', 'awaited event did not arrive in time'), ('ended_unsettled', 'ended with an effect not settled'), ('workers_keep_stopping', 'workers keep stopping at this point'), ('input_rejected', 'input no longer accepted by its workflow version'), ('approval_unaskable', 'approval request cannot be made'), ('settled_not_done', 'effect settled as not done'), ('sealed_value_unreadable', 'a sealed value cannot be opened')], max_length=32),
        ),
        migrations.AlterField(
            model_name='step',
            name='error_class',
            field=models.CharField(blank=True, choices=[('transient', 'Transient'), ('permanent', 'Permanent'), ('unknown', 'Unknown'), ('model_format', 'Model Format'), ('exhausted', 'Exhausted'), ('unclassified', 'Unclassified'), ('ended_in_doubt', 'Ended In Doubt'), ('ended_undoing', 'Ended Undoing'), ('key_reused', 'Key Reused'), ('unreadable', 'Unreadable')], max_length=16),
        ),
    ]
