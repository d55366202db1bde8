# How many times in a row a wait's approval request failed to open, and since when: the
# sweep holds the run for a person once the failure has lasted (approvals.open_failures).
# A constant database default and a nullable column: PostgreSQL adds both without
# rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0052_tool_call_key_open_for_repeat"),
    ]

    operations = [
        migrations.AddField(
            model_name="approvalwait",
            name="open_failures",
            field=models.IntegerField(db_default=0, default=0),
        ),
        migrations.AddField(
            model_name="approvalwait",
            name="failing_since",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
