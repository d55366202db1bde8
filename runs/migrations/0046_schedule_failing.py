# A schedule's trouble, kept on its row (runs.waiting.schedule_health): since when its ticks
# fail, how many in a row, and the last error. Nullable or with a database default: adding
# them rewrites nothing and takes no long lock.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0045_error_class_ended"),
    ]

    operations = [
        migrations.AddField(
            model_name="schedulestate",
            name="failing_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="schedulestate",
            name="failures",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="schedulestate",
            name="last_error",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
    ]
