"""The audit trigger (audit migration 0002) refuses every UPDATE and DELETE of an audit
record. From here on it lets one path through: a DELETE in a transaction that declared the
archive file it archives to (SET LOCAL audit.archival = the file's sha256, transaction-local)
of a record whose run has a tombstone pointing at that file. archive.archiving does both,
in the transaction that writes the tombstones; any other client, and the ORM (which refuses
on its own), is still refused. UPDATE stays refused for everyone.

This guards against mistakes and ordinary paths, not against a database superuser, who can
drop the trigger. Only a function is replaced: no table is rewritten or locked for long."""

from django.db import migrations

ALLOW_ARCHIVAL = """
CREATE OR REPLACE FUNCTION audit_record_refuse_change() RETURNS trigger AS $$
DECLARE
    archive_sha text := current_setting('audit.archival', true);
BEGIN
    IF TG_OP = 'DELETE' AND archive_sha IS NOT NULL AND archive_sha <> '' AND EXISTS (
        SELECT 1 FROM archive_archivedrun t
        JOIN archive_archivefile f ON f.id = t.archive_file_id
        WHERE t.original_run_id = OLD.run_id AND f.sha256 = archive_sha
    ) THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'audit records are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""
REFUSE_ALL = """
CREATE OR REPLACE FUNCTION audit_record_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit records are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""


def _run(sql):
    def apply(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            # A plain cursor: the SQL holds a literal % (plpgsql's format placeholder).
            with schema_editor.connection.cursor() as cursor:
                cursor.execute(sql)
    return apply


class Migration(migrations.Migration):
    dependencies = [
        ("archive", "0001_initial"),
        ("audit", "0002_append_only_trigger"),
    ]
    operations = [migrations.RunPython(_run(ALLOW_ARCHIVAL), _run(REFUSE_ALL))]
