"""Between transactional tests the database is emptied by truncating the tables written
(tests/emptying.py), not by Django's flush: what the next test finds must be what flush
leaves, the tables' sizes on disk included (the planner's choices depend on them)."""

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.db import connection

from audit.models import AuditRecord
from runs.models import Run, Step, Workflow
from tests.emptying import empty_test_database
from tests.factories import advance_once, new_run


def _what_is_there() -> dict:
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        counts = {}
        for table in connection.introspection.django_table_names(only_existing=True,
                                                                 include_views=False):
            cursor.execute(f"SELECT count(*) FROM {quote(table)}")  # noqa: S608 - model tables
            counts[table] = cursor.fetchone()[0]
        cursor.execute("SELECT relname FROM pg_class WHERE relkind = 'r' AND relname = ANY(%s) "
                       "AND pg_relation_size(oid) > 0", [list(counts)])
        on_disk = sorted(name for (name,) in cursor.fetchall())
    return {
        "tables_with_pages": on_disk,
        "rows": counts,
        "workflows": sorted(Workflow.objects.values_list("name", flat=True)),
        "content_types": sorted(ContentType.objects.values_list("app_label", "model")),
        "permissions": sorted(Permission.objects.values_list(
            "content_type__app_label", "codename")),
    }


@pytest.mark.django_db(transaction=True)
def test_emptying_leaves_what_flush_leaves_the_audit_trail_included():
    run = advance_once(new_run())
    user = User.objects.create_user("someone")
    user.groups.add(Group.objects.create(name="readers of the test"))
    # Rows of every kind the guards protect, joined by foreign keys, are there to delete.
    assert AuditRecord.objects.filter(run=run).exists()
    assert Step.objects.filter(run=run).exists() and Run.objects.exists()

    empty_test_database()
    emptied = _what_is_there()
    call_command("flush", verbosity=0, interactive=False)
    flushed = _what_is_there()

    assert emptied == flushed
    assert emptied["rows"]["audit_auditrecord"] == 0 and emptied["rows"]["runs_run"] == 0
    assert emptied["workflows"] and emptied["permissions"]
    # Dead rows of a delete would have left pages behind: a query plan would see them.
    assert "runs_run" not in emptied["tables_with_pages"]
