"""TRUNCATE of the audit table is refused to every role but a superuser, also when it
arrives by CASCADE from the runs table, and even to the table's owner."""

import uuid

import pytest
from django.db import DatabaseError, connection, transaction

from audit.access import record_access_change
from audit.chain import Actor
from audit.models import AccessRecord, AuditRecord
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _as_owner_role(statement: str) -> None:
    """Run `statement` as a fresh role that owns the audit table and may truncate every
    table; the role and the ownership are rolled back with the transaction."""
    role = f"audit_truncate_{uuid.uuid4().hex[:12]}"
    with transaction.atomic(), connection.cursor() as cursor:
        # The test's own rows were written in this transaction: check their foreign keys
        # now, or PostgreSQL refuses to alter or truncate a table with pending checks.
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(f"CREATE ROLE {role} NOSUPERUSER")
        cursor.execute(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {role}")
        cursor.execute(f"ALTER TABLE audit_auditrecord OWNER TO {role}")
        cursor.execute(f"SET LOCAL ROLE {role}")
        cursor.execute(statement)


@pytest.mark.parametrize("statement", [
    "TRUNCATE audit_auditrecord",
    "TRUNCATE audit_auditrecord CASCADE",
    "TRUNCATE runs_run CASCADE",
])
def test_truncate_of_the_audit_table_is_refused(statement):
    run = new_run()
    before = AuditRecord.objects.filter(run=run).count()

    with pytest.raises(DatabaseError, match="TRUNCATE refused"):
        _as_owner_role(statement)

    assert before >= 1
    assert AuditRecord.objects.filter(run=run).count() == before


def test_truncate_of_the_access_chain_is_refused():
    record_access_change(action="group_added", subject="user:someone",
                         actor=Actor.system("test"), before={"groups": []},
                         after={"groups": ["operators"]})

    with pytest.raises(DatabaseError, match="TRUNCATE refused"):
        _as_owner_role("TRUNCATE audit_accessrecord")

    assert AccessRecord.objects.count() == 1
