# The digest of an event's payload as sent, so that an id sent again with another payload is
# refused. A column with a constant default: added without rewriting the table; the rows
# received before it keep an empty digest, which no comparison reads.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0049_schedule_state_ahead_of_clock"),
    ]

    operations = [
        migrations.AddField(
            model_name="externalevent",
            name="payload_digest",
            field=models.CharField(blank=True, db_default="", default="", max_length=64),
        ),
    ]
