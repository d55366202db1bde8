# Where the sweeper's windowed pass over the kept events stopped (runs.waiting.events): in
# the database, so every worker process goes on from it and a restart does not start over.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0040_external_event_kept_order_index'),
    ]

    operations = [
        migrations.CreateModel(
            name='PassPosition',
            fields=[
                ('job', models.CharField(max_length=100, primary_key=True, serialize=False)),
                ('after_id', models.BigIntegerField(default=0)),
                ('updated_at', models.DateTimeField()),
            ],
        ),
    ]
