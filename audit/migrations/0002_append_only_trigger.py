"""On PostgreSQL, refuse UPDATE and DELETE of audit records from any client, not only
from the ORM. (SQLite, the embedded demo database, relies on the model's refusal.)"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION audit_record_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit records are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_record_append_only
    BEFORE UPDATE OR DELETE ON audit_auditrecord
    FOR EACH ROW EXECUTE FUNCTION audit_record_refuse_change();
"""
DROP = """
DROP TRIGGER IF EXISTS audit_record_append_only ON audit_auditrecord;
DROP FUNCTION IF EXISTS audit_record_refuse_change();
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
    dependencies = [("audit", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]
