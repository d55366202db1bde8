# Where each webhook cursor waits at a hole, judged by PostgreSQL's transactions rather than
# by a clock (api.webhooks.Holes). Nullable columns without a default: adding them changes
# the catalogue only, whatever the table holds. A subscriber's first pass after it finds any
# hole afresh.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0008_failed_deliveries_index'),
    ]

    operations = [
        migrations.AddField(
            model_name='webhooksubscriber',
            name='event_holes_horizon',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhooksubscriber',
            name='event_holes_seen_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhooksubscriber',
            name='event_holes_upto',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhooksubscriber',
            name='record_holes_horizon',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhooksubscriber',
            name='record_holes_seen_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhooksubscriber',
            name='record_holes_upto',
            field=models.BigIntegerField(blank=True, null=True),
        ),
    ]
