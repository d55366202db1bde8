# How far each webhook cursor's rows are read (api.webhooks.Position): the publisher queues
# the rows after a hole a cursor waits at, however many, and reads again only the holes.
# Nullable columns without a default: adding them changes the catalogue only, whatever the
# table holds. None reads as "up to the cursor": a subscriber's first pass after it reads on
# from its cursor, as before, and skips what an earlier release queued past a hole.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('api', '0009_cursor_holes'),
    ]

    operations = [
        migrations.AddField(
            model_name='webhooksubscriber',
            name='event_holes_missing',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhooksubscriber',
            name='event_queued_through',
            field=models.BigIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhooksubscriber',
            name='record_holes_missing',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='webhooksubscriber',
            name='record_queued_through',
            field=models.BigIntegerField(blank=True, null=True),
        ),
    ]
