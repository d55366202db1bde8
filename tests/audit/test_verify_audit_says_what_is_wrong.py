"""verify_audit names the broken record and says what is wrong with it, for each way a
person with the database's superuser role can tamper with a run's chain or the access
chain; and the access chain's end is checked against its head row, as a run's chain's end
is against its run row, so records removed from its end are found too."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit.access import AccessAction, record_access_change
from audit.chain import Actor
from audit.models import AccessRecord, AuditRecord
from runs.execution import executor
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def as_superuser(*statements):
    """Statements only a superuser switching the append-only triggers off can run."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        for sql, params in statements:
            cursor.execute(sql, params)
        cursor.execute("SET session_replication_role = origin")


def failure() -> str:
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit")
    return str(failed.value)


@pytest.fixture
def chain():
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    records = list(AuditRecord.objects.filter(run=run).order_by("seq"))
    assert len(records) >= 5
    return run, records


@pytest.mark.parametrize(("sql", "named", "why"), [
    ("UPDATE audit_auditrecord SET action = 'failed' WHERE id = %s", 2,
     "its content does not match its hash"),
    ("UPDATE audit_auditrecord SET data = '\"a string\"'::jsonb WHERE id = %s", 2,
     "its content does not match its hash"),
    ("UPDATE audit_auditrecord SET created_at = created_at + interval '1 microsecond' "
     "WHERE id = %s", 2, "its content does not match its hash"),
    ("UPDATE audit_auditrecord SET hash = repeat('a', 64) WHERE id = %s", 2,
     "its content does not match its hash"),
    ("UPDATE audit_auditrecord SET prev_hash = repeat('a', 64) WHERE id = %s", 2,
     "its prev_hash is not the hash of the record before it"),
    ("DELETE FROM audit_auditrecord WHERE id = %s", 3,
     "its seq is 4 where 3 was expected (records before it were removed"),
])
def test_a_tampered_run_chain_is_named_with_what_is_wrong(chain, sql, named, why):
    run, records = chain
    as_superuser((sql, [records[2].pk]))
    message = failure()
    assert f"audit chain of run {run.pk} is broken at record id={records[named].pk} " \
           f"seq={records[named].seq}" in message
    assert why in message


@pytest.fixture
def grants():
    for name in ("a", "b", "c"):
        record_access_change(action=AccessAction.API_TOKEN_CREATED, subject=f"token {name}",
                             actor=Actor.system("test"), before={}, after={"prefix": name})
    records = list(AccessRecord.objects.order_by("seq"))
    call_command("verify_audit")
    return records


def test_the_access_chain_cut_at_its_end_is_found(grants):
    last = grants[-1]
    as_superuser(("DELETE FROM audit_accessrecord WHERE id = %s", [last.pk]))
    assert failure() == (
        f"the access chain ends at seq={last.seq - 1} but its head keeps seq={last.seq} "
        f"hash={last.hash[:12]}: records were removed from its end, or its head was changed")


def test_an_access_chain_with_every_record_removed_is_found(grants):
    as_superuser(("DELETE FROM audit_accessrecord", []))
    assert f"the access chain ends at seq=0 but its head keeps seq={len(grants)}" in failure()


def test_a_changed_access_record_is_named_with_what_is_wrong(grants):
    as_superuser(("UPDATE audit_accessrecord SET subject = 'token mallory' WHERE id = %s",
                  [grants[1].pk]))
    assert failure() == (f"the access chain is broken at record id={grants[1].pk} seq=2 "
                         "action=api_token_created: its content does not match its hash (a "
                         "field of it, or its hash, was changed after it was written)")
