"""A chain's hashes are not keyed: a database superuser can rewrite every record of a chain,
recompute every hash and set the head its row keeps to match, and the chain verifies. Each
head is stored with a keyed seal (audit.head_seals), so verify_audit now names such a run
(or the access chain) and says what is wrong; a head sealed with an older key of the ring
still verifies, and one sealed with a key not held is named by its id."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit.access import AccessAction, access_hash, record_access_change
from audit.chain import CONTENT_FIELDS, GENESIS, Actor, chain_break, record_hash
from audit.head_seals import ACCESS_CHAIN, head_seal_problem, seal_head
from audit.models import AccessRecord, AuditRecord
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run

pytestmark = pytest.mark.django_db

OLD, NEW = "k1", "k2"
RING = {NEW: "the-new-secret-" + "n" * 40, OLD: "the-old-secret-" + "o" * 40}


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
def completed_run():
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return Run.objects.get(pk=run.pk)


def rewrite_run_chain(run: Run, *, reason: str) -> list[AuditRecord]:
    """What a superuser can do without the seal key: give record #2 another reason, then
    recompute every hash from there on and set the run's head to the new last hash."""
    records = list(AuditRecord.objects.filter(run=run).order_by("seq"))
    records[1].reason = reason
    prev, statements = GENESIS, []
    for record in records:
        record.prev_hash = prev
        record.hash = prev = record_hash(
            prev_hash=prev, **{f: getattr(record, f) for f in CONTENT_FIELDS})
        statements.append(("UPDATE audit_auditrecord SET reason = %s, prev_hash = %s, "
                           "hash = %s WHERE id = %s",
                           [record.reason, record.prev_hash, record.hash, record.pk]))
    statements.append(("UPDATE runs_run SET audit_seq = %s, audit_head = %s WHERE id = %s",
                       [records[-1].seq, records[-1].hash, run.pk]))
    as_superuser(*statements)
    return records


def test_a_run_chain_rewritten_with_every_hash_recomputed_fails_naming_the_run(
        completed_run, capsys):
    call_command("verify_audit")
    assert "every head sealed" in capsys.readouterr().out
    records = rewrite_run_chain(completed_run, reason="approved by the CFO")

    # The rewritten chain links record to record and ends at the head its run keeps: before
    # heads were sealed, verify_audit passed it.
    reread = list(AuditRecord.objects.filter(run=completed_run).order_by("seq"))
    assert chain_break(reread) is None and reread[1].reason == "approved by the CFO"
    assert Run.objects.get(pk=completed_run.pk).audit_head == records[-1].hash

    assert failure() == (
        f"audit chain of run {completed_run.pk} (head seq={records[-1].seq} "
        f"hash={records[-1].hash[:12]}): the head's seal does not verify with key 'dev': the "
        "chain was rewritten, or its head changed outside the runtime")


def test_a_rewritten_run_chain_whose_seal_was_removed_is_named_as_unsealed(completed_run):
    rewrite_run_chain(completed_run, reason="nothing to see")
    as_superuser(("UPDATE runs_run SET audit_seal = '' WHERE id = %s", [completed_run.pk]))
    message = failure()
    assert f"audit chain of run {completed_run.pk} " in message
    assert "its head carries no seal: the head was written outside the runtime" in message


def test_the_first_run_with_a_forged_head_is_named_among_intact_ones(completed_run):
    other = new_run()
    executor.advance_run(other.pk, worker="w1")
    rewrite_run_chain(other, reason="forged")
    assert f"audit chain of run {other.pk} (head seq=" in failure()


def test_the_access_chain_rewritten_with_its_head_fails_on_its_seal(capsys):
    for name in ("a", "b", "c"):
        record_access_change(action=AccessAction.API_TOKEN_CREATED, subject=f"token {name}",
                             actor=Actor.system("test"), before={}, after={"prefix": name})
    call_command("verify_audit")
    assert "chain intact, its head sealed" in capsys.readouterr().out

    records = list(AccessRecord.objects.order_by("seq"))
    records[0].subject = "token mallory"
    prev, statements = GENESIS, []
    for record in records:
        record.prev_hash = prev
        record.hash = prev = access_hash(record)
        statements.append(("UPDATE audit_accessrecord SET subject = %s, prev_hash = %s, "
                           "hash = %s WHERE id = %s",
                           [record.subject, record.prev_hash, record.hash, record.pk]))
    statements.append(("UPDATE audit_accesschainhead SET seq = %s, hash = %s WHERE id = 1",
                       [records[-1].seq, records[-1].hash]))
    as_superuser(*statements)

    assert failure() == (
        f"the access chain's head seq={records[-1].seq} hash={records[-1].hash[:12]}: the "
        "head's seal does not verify with key 'dev': the chain was rewritten, or its head "
        "changed outside the runtime")


def test_a_head_sealed_with_the_older_key_of_a_two_key_ring_verifies(settings, capsys):
    settings.AUDIT_SEAL_KEYS = {OLD: RING[OLD]}
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    record_access_change(action=AccessAction.API_TOKEN_CREATED, subject="token a",
                         actor=Actor.system("test"), before={}, after={})
    run.refresh_from_db()
    assert run.audit_seal.startswith(f"{OLD}:")

    # Rotated: a new key signs, the old one still verifies what it sealed.
    settings.AUDIT_SEAL_KEYS = RING
    call_command("verify_audit")
    assert "every head sealed" in capsys.readouterr().out
    assert head_seal_problem(run.pk, run.audit_seq, run.audit_head, run.audit_seal) is None
    assert seal_head(run.pk, run.audit_seq, run.audit_head).startswith(f"{NEW}:")

    # A run moving on is sealed again, with the new key.
    later = new_run()
    assert Run.objects.get(pk=later.pk).audit_seal.startswith(f"{NEW}:")
    call_command("verify_audit")


def test_a_head_sealed_with_a_key_not_held_is_named_by_its_id(settings):
    settings.AUDIT_SEAL_KEYS = {OLD: RING[OLD]}
    run = new_run()
    executor.advance_run(run.pk, worker="w1")

    settings.AUDIT_SEAL_KEYS = {NEW: RING[NEW]}
    assert f"audit chain of run {run.pk} (head seq=" in (message := failure())
    assert ("its head is sealed with key 'k1', which this installation does not hold "
            "(AUDIT_SEAL_KEYS)") in message

    # The id held with another secret (a forger's key): the seal does not verify.
    settings.AUDIT_SEAL_KEYS = {OLD: "a-forgers-secret-" + "f" * 40}
    assert "the head's seal does not verify with key 'k1'" in failure()


def test_the_access_chain_sealed_with_a_key_not_held_is_named_by_its_id(settings):
    settings.AUDIT_SEAL_KEYS = {OLD: RING[OLD]}
    record_access_change(action=AccessAction.API_TOKEN_CREATED, subject="token a",
                         actor=Actor.system("test"), before={}, after={})
    settings.AUDIT_SEAL_KEYS = {NEW: RING[NEW]}
    assert failure() == (
        "the access chain's head seq=1 hash="
        f"{AccessRecord.objects.get().hash[:12]}: its head is sealed with key 'k1', which "
        "this installation does not hold (AUDIT_SEAL_KEYS): the seal cannot be checked")


def test_a_seal_is_of_one_head_of_one_chain():
    seal = seal_head(7, 3, "a" * 64)
    assert head_seal_problem(7, 3, "a" * 64, seal) is None
    for chain, seq, head in ((8, 3, "a" * 64), (7, 2, "a" * 64), (7, 3, "b" * 64),
                             (ACCESS_CHAIN, 3, "a" * 64)):
        assert "does not verify with key 'dev'" in head_seal_problem(chain, seq, head, seal)
    assert "not of the form key-id:mac" in head_seal_problem(7, 3, "a" * 64, "nonsense")
