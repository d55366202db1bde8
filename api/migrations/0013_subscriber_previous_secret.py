"""A webhook subscriber's secret replaced stopped signing at once: every delivery from then
on failed at a receiver still checking the old one, until it switched. The replaced secret
is now kept, sealed as the current one is, with the time until which it signs beside it
(api.subscribers.subscriber_save). Both columns are empty for the subscribers there are:
no secret of theirs was replaced with an overlap. A constant database default: PostgreSQL
adds the column without rewriting the table."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("api", "0012_subscriber_secrets_sealed")]
    operations = [
        migrations.AddField(model_name="webhooksubscriber", name="previous_secret",
                            field=models.CharField(blank=True, default="", db_default="",
                                                    max_length=400)),
        migrations.AddField(model_name="webhooksubscriber", name="previous_secret_until",
                            field=models.DateTimeField(blank=True, null=True)),
    ]
