# A kept event is kept until a time (keep_until, RUNS_EVENT_KEEP_SECONDS after it came) and
# then expires (expired_at), never delivered (runs.waiting.kept_expiry). Nullable columns:
# added without rewriting the table. The rows kept before this migration are given
# keep_until = received_at + the setting's default (seven days) in batches (a short
# transaction each: this migration is not atomic), so that those older than that expire at
# the sweeper's next pass rather than never; rows the previous release keeps while this runs
# are given theirs by the sweeper's pass, along external_event_keep_until_idx.
#
# The pass over the kept rows walks external_event_kept_order_idx, which now leaves the
# expired rows out: rebuilt under its name (without blocking writes, as the others are
# built), so the pass's query is unchanged.
#
# Seven days is written here, not read from the settings: a migration must do tomorrow what
# it did today, whatever the configuration or the application's code becomes.

from datetime import timedelta

from django.db import migrations, models, transaction
from django.db.models import F

from audit.migration_operations import AddIndexConcurrently, RemoveIndexConcurrently

BATCH = 2000
KEEP_DEFAULT = timedelta(days=7)


def stamp_batch(events, *, after: int, batch: int) -> int | None:
    """Give the first `batch` kept rows past id `after` that lack it their keep_until; the
    last id stamped, or None when none lacked it. Only kept rows: a delivered event is kept
    for nothing."""
    found = list(events.filter(pk__gt=after, consumed_at__isnull=True, keep_until__isnull=True)
                 .order_by("pk").values_list("pk", flat=True)[:batch])
    events.filter(pk__in=found).update(keep_until=F("received_at") + KEEP_DEFAULT)
    return found[-1] if found else None


def backfill(apps, schema_editor):
    alias = schema_editor.connection.alias
    events = apps.get_model("runs", "ExternalEvent").objects.using(alias)
    last = 0
    while last is not None:
        with transaction.atomic(using=alias):
            last = stamp_batch(events, after=last, batch=BATCH)


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0046_schedule_failing"),
    ]

    operations = [
        migrations.AddField(
            model_name="externalevent",
            name="keep_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="externalevent",
            name="expired_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, atomic=False),
        RemoveIndexConcurrently(model_name="externalevent", name="external_event_kept_order_idx"),
        AddIndexConcurrently(
            model_name="externalevent",
            index=models.Index(condition=models.Q(("consumed_at__isnull", True),
                                                  ("expired_at__isnull", True)),
                               fields=["id"], name="external_event_kept_order_idx"),
        ),
        AddIndexConcurrently(
            model_name="externalevent",
            index=models.Index(condition=models.Q(("consumed_at__isnull", True),
                                                  ("expired_at__isnull", True)),
                               fields=["keep_until"], name="external_event_keep_until_idx"),
        ),
        AddIndexConcurrently(
            model_name="externalevent",
            index=models.Index(condition=models.Q(("expired_at__isnull", False)),
                               fields=["expired_at"], name="external_event_expired_idx"),
        ),
    ]
