# The console's search finds what people type and the runs list sorts in every order, each
# along an index: the end of a business key (its reverse, as a prefix), a key's first
# characters (pattern_ops indexes replace the plain key indexes: they answer equality too),
# a tool call's references, and the list sorted by creation or by current step. Each new
# index is built before the one it replaces is dropped, all without blocking writes (see
# audit.migration_operations).

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently, RemoveIndexConcurrently


def add_suffix_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            'CREATE INDEX CONCURRENTLY IF NOT EXISTS "run_business_key_suffix_idx" '
            'ON "runs_run" ((reverse("business_key")) text_pattern_ops)')


def drop_suffix_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute('DROP INDEX CONCURRENTLY IF EXISTS "run_business_key_suffix_idx"')


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0022_external_events"),
    ]

    operations = [
        # Not in the model's state (see Run.Meta): PostgreSQL only, the demo's SQLite
        # searches its few runs without it.
        migrations.RunPython(add_suffix_index, drop_suffix_index, elidable=False),
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(fields=["created_at", "id"], name="run_created_idx"),
        ),
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(fields=["current_step", "id"], name="run_current_step_idx"),
        ),
        AddIndexConcurrently(
            model_name="step",
            index=models.Index(fields=["idempotency_key"], name="step_key_prefix_idx",
                               opclasses=["varchar_pattern_ops"]),
        ),
        RemoveIndexConcurrently(model_name="step", name="step_key_idx"),
        AddIndexConcurrently(
            model_name="toolcall",
            index=models.Index(fields=["idempotency_key"], name="toolcall_key_prefix_idx",
                               opclasses=["varchar_pattern_ops"]),
        ),
        RemoveIndexConcurrently(model_name="toolcall", name="toolcall_key_idx"),
        AddIndexConcurrently(
            model_name="toolcall",
            index=models.Index(condition=models.Q(("remote_ref", ""), _negated=True),
                               fields=["remote_ref"], name="toolcall_remote_ref_idx"),
        ),
        AddIndexConcurrently(
            model_name="toolcall",
            index=models.Index(condition=models.Q(("compensation_ref", ""), _negated=True),
                               fields=["compensation_ref"], name="toolcall_compensation_ref_idx"),
        ),
    ]
