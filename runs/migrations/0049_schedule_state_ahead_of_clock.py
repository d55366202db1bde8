# Whether a schedule's trouble (runs.waiting.schedule_health) is its last slot lying ahead of
# the clock. With a database default: adding it rewrites nothing and takes no long lock.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0048_run_audit_seal"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedulestate",
            name="ahead_of_clock",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
