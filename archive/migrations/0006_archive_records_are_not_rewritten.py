"""Archive file records, removals and tombstones are written once. Whoever held the
application's rights could change an archive file's heads (or its digest) after the fact,
so that it backed a forged tombstone (0005 checks a removal against the file's heads), and
only `verify_audit --archive` on that very file told.

From here on an archive file record keeps what it was written with; only its removal's end
is written, once (`removal_finished_at` from empty to a time, with `kept_run_ids`, the runs
its removal left hot). Removals and tombstones are never changed. None of the three is
deleted: a tombstone is the run's only trace in the hot database, and each names its file.
A superuser can still switch the triggers off; verify_audit checks each tombstone against
its file's record, and `verify_audit --archive` a file against its record. Only functions
and triggers are added: no table is rewritten or locked for long."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION archive_file_refuse_rewrite() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'archive file records are kept: DELETE of % refused', OLD.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF (NEW.name, NEW.sha256, NEW.size, NEW.run_count, NEW.record_count,
        NEW.first_finished_at, NEW.last_finished_at, NEW.heads, NEW.created_at,
        NEW.created_by)
       IS DISTINCT FROM
       (OLD.name, OLD.sha256, OLD.size, OLD.run_count, OLD.record_count,
        OLD.first_finished_at, OLD.last_finished_at, OLD.heads, OLD.created_at,
        OLD.created_by) THEN
        RAISE EXCEPTION 'archive file records are kept: UPDATE of % refused, only its removal''s end is written', OLD.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF OLD.removal_finished_at IS NOT NULL
       AND (NEW.removal_finished_at IS DISTINCT FROM OLD.removal_finished_at
            OR NEW.kept_run_ids IS DISTINCT FROM OLD.kept_run_ids) THEN
        RAISE EXCEPTION 'archive file records are kept: the removal of % has ended, UPDATE refused', OLD.name
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER archive_file_refuse_rewrite
    BEFORE UPDATE OR DELETE ON archive_archivefile
    FOR EACH ROW EXECUTE FUNCTION archive_file_refuse_rewrite();

CREATE OR REPLACE FUNCTION archive_record_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION '% rows are kept as written: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER archive_removal_refuse_change
    BEFORE UPDATE OR DELETE ON archive_archiveremoval
    FOR EACH ROW EXECUTE FUNCTION archive_record_refuse_change();
CREATE TRIGGER archive_tombstone_refuse_change
    BEFORE UPDATE OR DELETE ON archive_archivedrun
    FOR EACH ROW EXECUTE FUNCTION archive_record_refuse_change();
"""
DROP = """
DROP TRIGGER IF EXISTS archive_file_refuse_rewrite ON archive_archivefile;
DROP TRIGGER IF EXISTS archive_removal_refuse_change ON archive_archiveremoval;
DROP TRIGGER IF EXISTS archive_tombstone_refuse_change ON archive_archivedrun;
DROP FUNCTION IF EXISTS archive_file_refuse_rewrite();
DROP FUNCTION IF EXISTS archive_record_refuse_change();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # A plain cursor: the SQL holds a literal % (plpgsql's format placeholder).
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("archive", "0005_audit_delete_only_of_chains_the_file_closed")]
    operations = [migrations.RunPython(forwards, backwards)]
