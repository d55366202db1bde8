# A step's and a tool call's idempotency key are found along an index of their first 16
# characters instead of the whole 64 (runs.reads.selectors.KEY_HEAD says why). Each new
# index is built before the one it replaces is dropped, without blocking writes. PostgreSQL
# only, in SQL, and not in the models' state: an operator class on an expression renders
# only with django.contrib.postgres installed (as run_business_key_suffix_idx, 0023); the
# demo's SQLite finds its few keys without an index.

from django.db import migrations

from audit.migration_operations import RemoveIndexConcurrently

HEAD_INDEXES = (("step_key_head_idx", "runs_step"), ("toolcall_key_head_idx", "runs_toolcall"))


def add_head_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name, table in HEAD_INDEXES:
            # A build that failed or was cancelled leaves an invalid index of that name,
            # which IF NOT EXISTS would keep while the old indexes are dropped.
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')
            schema_editor.execute(
                f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{name}" '
                f'ON "{table}" ((left("idempotency_key", 16)) text_pattern_ops)')


def drop_head_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for name, _ in HEAD_INDEXES:
            schema_editor.execute(f'DROP INDEX CONCURRENTLY IF EXISTS "{name}"')


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0043_external_event_awaited_ref"),
    ]

    operations = [
        migrations.RunPython(add_head_indexes, drop_head_indexes, elidable=False),
        RemoveIndexConcurrently(model_name="step", name="step_key_prefix_idx"),
        RemoveIndexConcurrently(model_name="toolcall", name="toolcall_key_prefix_idx"),
    ]
