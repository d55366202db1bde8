# Each checkpoint beat stores outside the database is named here too, so that the age of the
# newest is read without listing the checkpoint storage (a new, small table).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0010_person_label_index'),
    ]

    operations = [
        migrations.CreateModel(
            name='StoredCheckpoint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=255, unique=True)),
                ('taken_at', models.DateTimeField(db_index=True)),
                ('chains', models.PositiveIntegerField()),
            ],
        ),
    ]
