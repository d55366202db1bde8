# A kept event's awaited reference (what a step waiting for it holds in remote_ref) becomes a
# column written with the row by transitions.events.awaiting_ref, instead of being rebuilt in
# the sweeper's query, a second form of it. The rows written before are filled here in
# batches (a short transaction each: this migration is not atomic); the indexes are built
# without blocking writes. The previous release keeps receiving events while this runs: the
# rows it keeps meanwhile are filled by the sweeper's pass
# (runs.waiting.kept.consume_kept_events), along external_event_no_ref_idx.
#
# The reference is built by a copy of awaiting_ref as it was when this migration was
# written, on the historical model: a migration must do tomorrow what it did today, whatever
# the application's code becomes.

import hashlib

from django.db import migrations, models, transaction

from audit.migration_operations import AddIndexConcurrently, RemoveIndexConcurrently

BATCH = 2000
AWAITING = "awaiting-event:"
# The length of Step.remote_ref, which the reference must fit.
REF_LENGTH = 300
KEY_DIGEST = "sha256="


def awaited_ref(event: str, key: str) -> str:
    ref = f"{AWAITING}{event}:{key}"
    if len(ref) <= REF_LENGTH:
        return ref
    return f"{AWAITING}{event}:{KEY_DIGEST}{hashlib.sha256(key.encode()).hexdigest()}"


def fill_batch(events, *, after: int, batch: int) -> int | None:
    """Fill the first `batch` kept rows past id `after` that lack the reference; the last id
    filled, or None when none lacked it. Only kept rows: nothing looks a consumed event up
    by its reference, and rewriting every delivered event would be all cost."""
    found = list(events.filter(pk__gt=after, awaited_ref="", consumed_at__isnull=True)
                 .order_by("pk").only("pk", "event_name", "correlation_key")[:batch])
    for event in found:
        event.awaited_ref = awaited_ref(event.event_name, event.correlation_key)
    events.bulk_update(found, ["awaited_ref"])
    return found[-1].pk if found else None


def backfill(apps, schema_editor):
    alias = schema_editor.connection.alias
    events = apps.get_model("runs", "ExternalEvent").objects.using(alias)
    last = 0
    while last is not None:
        with transaction.atomic(using=alias):
            last = fill_batch(events, after=last, batch=BATCH)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0042_external_event_refused"),
    ]

    operations = [
        migrations.AddField(
            model_name="externalevent",
            name="awaited_ref",
            field=models.CharField(blank=True, db_default="", default="", max_length=300),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, atomic=False),
        AddIndexConcurrently(
            model_name="externalevent",
            index=models.Index(condition=models.Q(("consumed_at__isnull", True),
                                                  ("refused_at__isnull", True)),
                               fields=["awaited_ref", "workflow_name"],
                               name="external_event_kept_ref_idx"),
        ),
        AddIndexConcurrently(
            model_name="externalevent",
            index=models.Index(condition=models.Q(("awaited_ref", ""),
                                                  ("consumed_at__isnull", True)),
                               fields=["id"], name="external_event_no_ref_idx"),
        ),
        # Its lookup by event and key is now the one by reference above.
        RemoveIndexConcurrently(model_name="externalevent", name="external_event_kept_idx"),
    ]
