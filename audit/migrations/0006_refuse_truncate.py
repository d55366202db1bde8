"""On PostgreSQL, refuse TRUNCATE of the audit tables too (the runs' records and the access
chain's) (the row triggers of 0002 do not
fire on TRUNCATE, and `TRUNCATE runs_run CASCADE` reaches this table through its foreign
key). A statement-level BEFORE TRUNCATE trigger fires for cascaded tables as well.

Superusers are let through: a superuser can switch every trigger off anyway
(session_replication_role), so refusing them protects nothing, and the test runner's flush
between transactional tests truncates every table as one. The application's role is never a
superuser and owns no audit table (docs/operations.md, "Database roles")."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION audit_record_refuse_truncate() RETURNS trigger AS $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION 'audit records are append-only: TRUNCATE refused'
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_record_no_truncate
    BEFORE TRUNCATE ON audit_auditrecord
    FOR EACH STATEMENT EXECUTE FUNCTION audit_record_refuse_truncate();
CREATE TRIGGER access_record_no_truncate
    BEFORE TRUNCATE ON audit_accessrecord
    FOR EACH STATEMENT EXECUTE FUNCTION audit_record_refuse_truncate();
"""
DROP = """
DROP TRIGGER IF EXISTS audit_record_no_truncate ON audit_auditrecord;
DROP TRIGGER IF EXISTS access_record_no_truncate ON audit_accessrecord;
DROP FUNCTION IF EXISTS audit_record_refuse_truncate();
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [('audit', '0005_access_chain')]
    operations = [migrations.RunPython(forwards, backwards)]
