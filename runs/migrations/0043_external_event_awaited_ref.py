# A kept event's awaited reference (what a step waiting for it holds in remote_ref) becomes a
# column written with the row by transitions.events.awaiting_ref, instead of being rebuilt in
# the sweeper's query, a second form of it. The rows written before are filled here in
# batches (a short transaction each: this migration is not atomic) by that same function; the
# indexes are built without blocking writes. The previous release keeps receiving events
# while this runs: the rows it keeps meanwhile are filled by the sweeper's pass
# (runs.waiting.kept.consume_kept_events), along external_event_no_ref_idx.

from django.db import migrations, models, transaction

from audit.migration_operations import AddIndexConcurrently, RemoveIndexConcurrently
from runs.waiting.kept import fill_awaited_refs

BATCH = 2000


def backfill(apps, schema_editor):
    alias = schema_editor.connection.alias
    events = apps.get_model("runs", "ExternalEvent").objects.using(alias)
    last = 0
    while last is not None:
        with transaction.atomic(using=alias):
            last = fill_awaited_refs(events.filter(pk__gt=last), batch=BATCH)


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
