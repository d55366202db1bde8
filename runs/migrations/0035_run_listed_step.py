# The runs list sorted by current step read every run it filtered and sorted them (about
# 250 ms at a million runs): no index may name current_step, which each step's checkpoint
# changes (runs 0034). listed_step is current_step while the run is not held by a worker and
# NULL while it is, so it changes only with the run's status, whose updates are not HOT
# anyway, and an index on it keeps the checkpoints in place. A trigger keeps it, whichever
# statement writes the run; existing runs get it in batches (a commit each, no long lock);
# the index is built without blocking writes.

from django.db import migrations, models

from audit.migration_operations import AddIndexConcurrently

HELD = "('running', 'compensating')"
LISTED = f"CASE WHEN NEW.status IN {HELD} THEN NULL ELSE NEW.current_step END"

POSTGRES_CREATE = f"""
CREATE OR REPLACE FUNCTION runs_run_listed_step() RETURNS trigger AS $$
BEGIN
    NEW.listed_step := {LISTED};
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER run_listed_step
    BEFORE INSERT OR UPDATE OF status, current_step, listed_step ON runs_run
    FOR EACH ROW EXECUTE FUNCTION runs_run_listed_step();
"""
POSTGRES_DROP = """
DROP TRIGGER IF EXISTS run_listed_step ON runs_run;
DROP FUNCTION IF EXISTS runs_run_listed_step();
"""
# SQLite (the demo) has no BEFORE trigger that changes the row: the row is set right after.
SQLITE_CREATE = [
    f"""CREATE TRIGGER run_listed_step_insert AFTER INSERT ON runs_run BEGIN
        UPDATE runs_run SET listed_step = {LISTED} WHERE id = NEW.id; END""",
    f"""CREATE TRIGGER run_listed_step_update AFTER UPDATE OF status, current_step,
        listed_step ON runs_run WHEN NEW.listed_step IS NOT ({LISTED}) BEGIN
        UPDATE runs_run SET listed_step = {LISTED} WHERE id = NEW.id; END""",
]
SQLITE_DROP = ["DROP TRIGGER IF EXISTS run_listed_step_insert",
               "DROP TRIGGER IF EXISTS run_listed_step_update"]
BATCH = 20_000


def create_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    with schema_editor.connection.cursor() as cursor:
        for statement in ([POSTGRES_CREATE] if vendor == "postgresql" else SQLITE_CREATE):
            cursor.execute(statement)


def drop_triggers(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    with schema_editor.connection.cursor() as cursor:
        for statement in ([POSTGRES_DROP] if vendor == "postgresql" else SQLITE_DROP):
            cursor.execute(statement)


def backfill(apps, schema_editor):
    # The runs written before the trigger, by id range: each batch its own short
    # transaction (this migration is not atomic).
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT coalesce(min(id), 0), coalesce(max(id), 0) FROM runs_run")
        low, high = cursor.fetchone()
        for start in range(low, high + 1, BATCH):
            cursor.execute(
                f"UPDATE runs_run SET listed_step = current_step WHERE id >= %s AND id < %s "
                f"AND status NOT IN {HELD} AND listed_step IS NULL", [start, start + BATCH])


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0034_run_updates_in_place"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="listed_step",
            field=models.CharField(blank=True, editable=False, max_length=200, null=True),
        ),
        migrations.RunPython(create_triggers, drop_triggers, atomic=True),
        migrations.RunPython(backfill, migrations.RunPython.noop, atomic=False),
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(condition=models.Q(("listed_step__isnull", False)),
                               fields=["listed_step", "id"], name="run_listed_step_idx"),
        ),
    ]
