from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0057_error_class_key_reused"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentturn",
            name="sealed_content",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
    ]
