"""Admin named the webhook deliveries list "Webhook deliverys" (Django adds an s). A change
of the model's options only: no SQL."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("api", "0013_subscriber_previous_secret")]
    operations = [
        migrations.AlterModelOptions(name="webhookdelivery",
                                     options={"verbose_name_plural": "webhook deliveries"}),
    ]
