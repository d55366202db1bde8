"""One delivery per subscriber and step outcome record, refused by the database as for
events: the unique index is built concurrently (writes go on during the build)."""

from django.db import migrations, models

from audit.migration_operations import AddUniqueConstraintConcurrently


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY runs outside a transaction

    dependencies = [
        ('api', '0005_step_outcomes_from_audit'),
    ]

    operations = [
        AddUniqueConstraintConcurrently(
            model_name='webhookdelivery',
            constraint=models.UniqueConstraint(condition=models.Q(('record__isnull', False)), fields=('subscriber', 'record'), name='webhook_one_delivery_per_record'),
        ),
    ]
