"""Agent turns and tool calls carry the run generation they belong to (a re-run from a step
starts a new one). The new unique indexes are built concurrently (writes go on during the
build), before the old ones go."""

from django.db import migrations, models

from audit.migration_operations import AddUniqueConstraintConcurrently


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ('runs', '0031_run_and_step_generation'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='agentturn',
            options={'ordering': ['step_id', 'generation', 'index']},
        ),
        migrations.AlterModelOptions(
            name='toolcall',
            options={'ordering': ['step_id', 'generation', 'turn', 'index']},
        ),
        migrations.AddField(
            model_name='agentturn',
            name='generation',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name='toolcall',
            name='generation',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        AddUniqueConstraintConcurrently(
            model_name='agentturn',
            constraint=models.UniqueConstraint(fields=('step', 'generation', 'index'), name='agentturn_unique_step_gen_index'),
        ),
        AddUniqueConstraintConcurrently(
            model_name='toolcall',
            constraint=models.UniqueConstraint(fields=('step', 'generation', 'turn', 'index'), name='toolcall_unique_step_gen_turn_index'),
        ),
        migrations.RemoveConstraint(
            model_name='agentturn',
            name='agentturn_unique_step_index',
        ),
        migrations.RemoveConstraint(
            model_name='toolcall',
            name='toolcall_unique_step_turn_index',
        ),
    ]
