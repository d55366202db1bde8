"""Webhook subscribers' secrets were stored in clear: a copy of the database (a backup, a
replica, a dump handed to support) signed deliveries any receiver would take as ours. From
here on a secret is stored sealed with the field encryption key in use (FIELD_ENCRYPTION_KEYS,
the key ring of declared sensitive fields): "enc:<key id>:<Fernet token>" of its JSON, as
runs.machine.sensitive seals a value. The column widens to hold the sealed form (a change
of a varchar's length only: no row is rewritten), and the secrets stored are sealed here,
with the historical model and the key as settings hold it, so that this migration does what
it did whatever the application's code becomes."""

import json

from cryptography.fernet import Fernet
from django.conf import settings
from django.db import migrations, models

PREFIX = "enc:"


def seal_secrets(apps, schema_editor):
    ring = list(settings.FIELD_ENCRYPTION_KEYS.items())
    key_id, key = ring[0]
    fernet = Fernet(key.encode())
    subscriber = apps.get_model("api", "WebhookSubscriber")
    for row in subscriber.objects.exclude(secret__startswith=PREFIX).only("pk", "secret"):
        token = fernet.encrypt(json.dumps(row.secret).encode()).decode()
        subscriber.objects.filter(pk=row.pk).update(secret=f"{PREFIX}{key_id}:{token}")


class Migration(migrations.Migration):
    dependencies = [("api", "0011_pending_deliveries_index")]
    operations = [
        migrations.AlterField(model_name="webhooksubscriber", name="secret",
                              field=models.CharField(max_length=400)),
        # Not undone: the sealed secrets stay sealed (signing_secret opens them).
        migrations.RunPython(seal_secrets, migrations.RunPython.noop),
    ]
