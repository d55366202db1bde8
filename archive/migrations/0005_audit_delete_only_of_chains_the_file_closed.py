"""The archival path's DELETE of audit records (0002) asked only that each record's run have
a tombstone pointing at the archive file the transaction names, not that the file closed the
run: whoever holds the application's rights (INSERT on tombstones, DELETE on the audit table)
could tombstone a hot run to any file and remove it with its whole chain.

From here on each DELETE statement of audit records on that path is checked once, after it:
for every run whose records it removed, the named file's heads must hold the run at the
last record removed (seq and hash). A statement trigger with the removed rows as a
transition table expands the file's heads once per statement (one batch of runs), where a
row trigger would read the whole heads value again for every record removed. The row
trigger of 0002 stays as it is: cheap, and what refuses every DELETE off the archival path.

A superuser can still switch both off; verify_audit names a tombstone whose file does not
hold its run, whoever wrote it. Only a function and a trigger are added: no table is
rewritten or locked for long."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION audit_record_removed_chains_closed() RETURNS trigger AS $$
DECLARE
    archive_sha text := current_setting('audit.archival', true);
    unclosed bigint;
BEGIN
    SELECT removed.run_id INTO unclosed
    FROM (SELECT DISTINCT ON (run_id) run_id, seq, hash FROM removed_records
          ORDER BY run_id, seq DESC) AS removed
    LEFT JOIN (SELECT head.key, head.value
               FROM archive_archivefile f, jsonb_each(f.heads) AS head
               WHERE f.sha256 = archive_sha) AS closed
        ON closed.key = removed.run_id::text
       AND closed.value = jsonb_build_array(removed.seq, removed.hash)
    WHERE closed.key IS NULL
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'audit records are append-only: DELETE refused, archive file % does not close the chain of run % at the records removed', archive_sha, unclosed
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_record_removed_chains_closed
    AFTER DELETE ON audit_auditrecord
    REFERENCING OLD TABLE AS removed_records
    FOR EACH STATEMENT EXECUTE FUNCTION audit_record_removed_chains_closed();
"""
DROP = """
DROP TRIGGER IF EXISTS audit_record_removed_chains_closed ON audit_auditrecord;
DROP FUNCTION IF EXISTS audit_record_removed_chains_closed();
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
    dependencies = [
        ("archive", "0004_archived_run_status_index"),
        ("audit", "0011_stored_checkpoint"),
    ]
    operations = [migrations.RunPython(forwards, backwards)]
