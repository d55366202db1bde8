# A tool call a person settled as not done keeps its key open for the model's repeat of it.
# A constant database default: PostgreSQL adds the column without rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0051_run_open_work_idx"),
    ]

    operations = [
        migrations.AddField(
            model_name="toolcall",
            name="key_open_for_repeat",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
