# A constant default: PostgreSQL adds the column without rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0024_worker_registry'),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="drill",
            field=models.BooleanField(db_default=False, default=False),
        ),
    ]
