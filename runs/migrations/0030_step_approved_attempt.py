from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0029_attention_reasons_of_both_waits_and_unsettled'),
    ]

    operations = [
        migrations.AddField(
            model_name='step',
            name='approved_attempt',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
    ]
