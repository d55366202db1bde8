# Each run's audit chain head gets a keyed seal (audit.head_seals), so that verify_audit can
# tell a chain rewritten in the database, every hash recomputed and the head set to match,
# from one the runtime wrote. A nullable column: adding it rewrites nothing and takes no
# long lock on PostgreSQL, and SQLite (the demo) adds it without rebuilding the table (which
# would drop the triggers of 0035).
#
# The heads written before it are sealed here, in batches by id (a short transaction each:
# this migration is not atomic), so that from now on verify_audit can refuse a head without
# a seal. They are sealed with the key the settings give (AUDIT_SEAL_KEYS, the one that
# signs), by the seal of audit.head_seals written out here: a migration does later what it
# did when it was written, whatever the application's code becomes (its tests check that
# what it writes verifies with audit.head_seals).
#
# Sealing vouches for the heads as they are now: run verify_audit before this migration to
# know the chains were intact then. Stop the workers of the previous release while it runs:
# they move heads on without a seal, and verify_audit would name those runs.

import hashlib
import hmac

from django.conf import settings
from django.db import migrations, models, transaction
from django.db.models import Q

BATCH = 2000


def seal_head(run_id: int, seq: int, head_hash: str) -> str:
    """The head's seal as audit.head_seals made it when this was written: "key id:hex
    HMAC-SHA256" of "audit-head:<run id>:<seq>:<head hash>" with the key that signs."""
    key_id, secret = next(iter(settings.AUDIT_SEAL_KEYS.items()))
    message = f"audit-head:{run_id}:{seq}:{head_hash}".encode()
    return f"{key_id}:{hmac.digest(secret.encode(), message, hashlib.sha256).hex()}"


def seal_batch(runs, *, after: int, batch: int = BATCH) -> int | None:
    """Seal the heads of the first `batch` runs past id `after` that have a chain and no
    seal; the last id read, or None when none was left. A head that moved on since it was
    read is left unsealed: the seal would be of a head the run no longer keeps."""
    unsealed = Q(audit_seal__isnull=True) | Q(audit_seal="")
    found = list(runs.filter(unsealed, pk__gt=after, audit_seq__gt=0).order_by("pk")
                 .values_list("pk", "audit_seq", "audit_head")[:batch])
    if not found:
        return None
    connection = transaction.get_connection(runs.db)
    sealed = [(pk, seq, head, seal_head(pk, seq, head)) for pk, seq, head in found]
    if connection.vendor == "postgresql":
        # One statement per batch: a million runs would otherwise be a million round trips.
        table = connection.ops.quote_name(runs.model._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} AS r SET audit_seal = v.seal "  # noqa: S608 - a table name
                "FROM unnest(%s::bigint[], %s::integer[], %s::text[], %s::text[]) "
                "AS v(id, seq, head, seal) "
                "WHERE r.id = v.id AND r.audit_seq = v.seq AND r.audit_head = v.head "
                "AND coalesce(r.audit_seal, '') = ''",
                [list(column) for column in zip(*sealed, strict=True)])
    else:
        for pk, seq, head, seal in sealed:
            runs.filter(unsealed, pk=pk, audit_seq=seq, audit_head=head).update(
                audit_seal=seal)
    return found[-1][0]


def seal_existing_heads(apps, schema_editor):
    alias = schema_editor.connection.alias
    runs = apps.get_model("runs", "Run").objects.using(alias)
    last = 0
    while last is not None:
        with transaction.atomic(using=alias):
            last = seal_batch(runs, after=last)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0047_external_event_keep_until"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="audit_seal",
            field=models.TextField(blank=True, null=True),
        ),
        # Backwards the column goes, and its seals with it.
        migrations.RunPython(seal_existing_heads, migrations.RunPython.noop, atomic=False),
    ]
