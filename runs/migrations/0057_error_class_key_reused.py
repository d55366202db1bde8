# The error class key_reused (runs.models.ErrorClass): the choices of the step's column only,
# no change to the table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0056_step_agent_idx'),
    ]

    operations = [
        migrations.AlterField(
            model_name='step',
            name='error_class',
            field=models.CharField(blank=True, choices=[('transient', 'Transient'), ('permanent', 'Permanent'), ('unknown', 'Unknown'), ('model_format', 'Model Format'), ('exhausted', 'Exhausted'), ('unclassified', 'Unclassified'), ('ended_in_doubt', 'Ended In Doubt'), ('ended_undoing', 'Ended Undoing'), ('key_reused', 'Key Reused')], max_length=16),
        ),
    ]
