# The access chain: permission, membership, staff status and API token changes, chained
# like a run's audit log but in a table of its own (they belong to no run). Two new tables,
# nothing existing is touched. On PostgreSQL a trigger refuses UPDATE and DELETE of its
# records, as for audit_auditrecord.

from django.db import migrations, models

CREATE = """
CREATE OR REPLACE FUNCTION audit_access_refuse_change() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'access records are append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
CREATE TRIGGER audit_access_append_only
    BEFORE UPDATE OR DELETE ON audit_accessrecord
    FOR EACH ROW EXECUTE FUNCTION audit_access_refuse_change();
"""
DROP = """
DROP TRIGGER IF EXISTS audit_access_append_only ON audit_accessrecord;
DROP FUNCTION IF EXISTS audit_access_refuse_change();
"""


def forwards(apps, schema_editor):
    apps.get_model("audit", "AccessChainHead").objects.using(
        schema_editor.connection.alias).get_or_create(pk=1)
    if schema_editor.connection.vendor == "postgresql":
        # A plain cursor: the SQL holds a literal % (plpgsql's format placeholder).
        with schema_editor.connection.cursor() as cursor:
            cursor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):

    dependencies = [
        ('audit', '0004_uncommon_action_index'),
    ]

    operations = [
        migrations.CreateModel(
            name='AccessChainHead',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.PositiveIntegerField(default=0)),
                ('hash', models.CharField(blank=True, max_length=64)),
            ],
        ),
        migrations.CreateModel(
            name='AccessRecord',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('seq', models.PositiveIntegerField(unique=True)),
                ('action', models.CharField(max_length=64)),
                ('subject', models.CharField(max_length=300)),
                ('actor_kind', models.CharField(choices=[('system', 'System'), ('user', 'User')], max_length=16)),
                ('actor_label', models.CharField(max_length=200)),
                ('actor_user_id', models.BigIntegerField(blank=True, null=True)),
                ('reason', models.TextField(blank=True)),
                ('before', models.JSONField(blank=True, default=dict)),
                ('after', models.JSONField(blank=True, default=dict)),
                ('created_at', models.DateTimeField()),
                ('prev_hash', models.CharField(max_length=64)),
                ('hash', models.CharField(max_length=64)),
            ],
            options={
                'ordering': ['seq'],
            },
        ),
        migrations.RunPython(forwards, backwards),
    ]
