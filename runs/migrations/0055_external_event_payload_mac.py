# The keyed digest of an event's whole payload (its redacted fields too), so that an id sent
# again with a secret changed is refused. A column with a constant default: added without
# rewriting the table; the rows received before it keep an empty one, and are compared by
# their redacted payload_digest alone, as they were.

from django.db import migrations, models

from audit.migration_operations import LockWaitAtMost


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0054_agentturn_refused"),
    ]

    operations = [
        # The ALTER waits behind the previous release's open transactions on the table,
        # and its work waits behind the ALTER: bounded, rolled back and run again.
        LockWaitAtMost(seconds=5),
        migrations.AddField(
            model_name="externalevent",
            name="payload_mac",
            field=models.CharField(blank=True, db_default="", default="", max_length=300),
        ),
    ]
