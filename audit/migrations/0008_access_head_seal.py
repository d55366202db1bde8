# The access chain's head gets a keyed seal (audit.head_seals), as each run's head does
# (runs 0048): without it whoever can write both the access records and the head row can
# rewrite the chain and the row to match. A column with a database default: adding it
# rewrites nothing. The head as it is now is sealed here, with the key the settings give
# (AUDIT_SEAL_KEYS, the one that signs), so that verify_audit can refuse an unsealed head
# from now on. The seal of audit.head_seals is written out here, as runs 0048 does: a
# migration does later what it did when it was written.

import hashlib
import hmac

from django.conf import settings
from django.db import migrations, models


def seal_head(seq: int, head_hash: str) -> str:
    """The access chain head's seal as audit.head_seals made it when this was written."""
    key_id, secret = next(iter(settings.AUDIT_SEAL_KEYS.items()))
    message = f"audit-head:access:{seq}:{head_hash}".encode()
    return f"{key_id}:{hmac.digest(secret.encode(), message, hashlib.sha256).hex()}"


def seal_access_head(apps, schema_editor):
    alias = schema_editor.connection.alias
    heads = apps.get_model("audit", "AccessChainHead").objects.using(alias)
    # One row (pk 1); locked, so a grant made meanwhile is not sealed over.
    for head in heads.select_for_update().filter(seal=""):
        heads.filter(pk=head.pk).update(seal=seal_head(head.seq, head.hash))


class Migration(migrations.Migration):

    dependencies = [
        ("audit", "0007_access_search_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="accesschainhead",
            name="seal",
            field=models.TextField(blank=True, db_default="", default=""),
        ),
        migrations.RunPython(seal_access_head, migrations.RunPython.noop),
    ]
