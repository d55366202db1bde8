# Why the runtime took none of a model turn's tool calls (too many for one turn:
# runs.agents.turn_bounds). A constant database default: PostgreSQL adds the column without
# rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0053_approval_wait_open_failures"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentturn",
            name="refused",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
    ]
