"""The audit trail is append-only (model and PostgreSQL trigger) and hash-chained; the
verify_audit command names the first broken record."""


import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction

from audit.chain import verify_chain
from audit.models import AppendOnlyError, AuditRecord
from runs.execution import executor
from tests.factories import make_due, new_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def completed_run():
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    return run


def test_model_refuses_update_and_delete(completed_run):
    record = AuditRecord.objects.filter(run=completed_run).first()
    record.reason = "rewritten"
    with pytest.raises(AppendOnlyError):
        record.save()
    with pytest.raises(AppendOnlyError):
        record.delete()
    with pytest.raises(AppendOnlyError):
        AuditRecord.objects.filter(run=completed_run).update(reason="x")
    with pytest.raises(AppendOnlyError):
        AuditRecord.objects.filter(run=completed_run).delete()


@pytest.mark.parametrize("sql", [
    "UPDATE audit_auditrecord SET reason = 'rewritten' WHERE run_id = %s",
    "DELETE FROM audit_auditrecord WHERE run_id = %s",
])
def test_postgresql_trigger_refuses_any_client(completed_run, sql):
    with pytest.raises(DatabaseError, match="append-only"):
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, [completed_run.pk])
    assert AuditRecord.objects.filter(run=completed_run, reason="rewritten").count() == 0


def test_chain_links_every_record_and_the_run_keeps_its_head(completed_run):
    records = list(AuditRecord.objects.filter(run=completed_run).order_by("seq"))
    assert verify_chain(records) is None
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    assert all(b.prev_hash == a.hash for a, b in zip(records, records[1:], strict=False))
    completed_run.refresh_from_db()
    assert completed_run.audit_head == records[-1].hash
    assert completed_run.audit_seq == records[-1].seq


def test_verify_audit_passes_then_names_the_first_tampered_record(completed_run, capsys):
    call_command("verify_audit")
    assert "all chains intact" in capsys.readouterr().out
    victim = AuditRecord.objects.filter(run=completed_run).order_by("seq")[2]
    with connection.cursor() as cursor:
        # Only a superuser bypassing triggers can do this; that is what the chain is for.
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("UPDATE audit_auditrecord SET reason = 'forged' WHERE id = %s",
                       [victim.pk])
        cursor.execute("SET session_replication_role = origin")
    with pytest.raises(CommandError, match=f"id={victim.pk} seq=3"):
        call_command("verify_audit")


def _as_superuser(*statements):
    """Statements only a superuser bypassing the append-only triggers can run."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        for sql, params in statements:
            cursor.execute(sql, params)
        cursor.execute("SET session_replication_role = origin")


def test_verify_audit_names_a_run_whose_last_records_were_removed(completed_run):
    """What is left of a chain cut at its end still links record to record: only the head
    the run row keeps tells that records are missing."""
    last = AuditRecord.objects.filter(run=completed_run).order_by("-seq").first()
    _as_superuser(("DELETE FROM audit_auditrecord WHERE id = %s", [last.pk]))
    assert verify_chain(list(AuditRecord.objects.filter(run=completed_run)
                             .order_by("seq"))) is None
    with pytest.raises(CommandError, match=(
            f"audit chain of run {completed_run.pk} ends at seq={last.seq - 1} but its run "
            f"keeps the head seq={last.seq} hash={last.hash[:12]}: records were removed")):
        call_command("verify_audit")


def test_verify_audit_names_a_run_whose_records_were_all_removed(completed_run, capsys):
    other = new_run()  # a later run whose chain is whole: the check goes on past the first
    executor.advance_run(other.pk, worker="w1")
    completed_run.refresh_from_db()
    _as_superuser(("DELETE FROM audit_auditrecord WHERE run_id = %s", [completed_run.pk]))
    with pytest.raises(CommandError, match=(
            f"audit chain of run {completed_run.pk} has no records but its run keeps the "
            f"head seq={completed_run.audit_seq}: its records were removed")):
        call_command("verify_audit")


def test_verify_audit_names_a_run_whose_head_was_changed(completed_run):
    _as_superuser(("UPDATE runs_run SET audit_head = %s WHERE id = %s",
                   ["f" * 64, completed_run.pk]))
    with pytest.raises(CommandError, match="records were removed from its end, or the run's "
                                           "head was changed"):
        call_command("verify_audit")


@pytest.mark.django_db
def test_every_action_a_run_writes_is_named_in_the_one_enumeration(script):

    from audit.actions import AuditAction
    from runs.machine.errors import PermanentError, UnknownOutcome

    script.plan["create-task"] = [UnknownOutcome("reset"), "effect-then-raise"]
    script.plan["book-shipment"] = [PermanentError("no carrier")]
    runs = [new_run(), new_run("test-saga")]
    for run in runs:
        for _ in range(5):
            executor.advance_run(run.pk, worker="w1")
            # Due now rather than after the backoff.
            make_due(run, status="waiting")
    written = set(AuditRecord.objects.filter(run__in=runs).values_list("action", flat=True))
    assert len(written) > 8
    assert written <= set(AuditAction)


def test_the_index_of_uncommon_actions_leaves_out_no_action_the_metrics_count():
    # The metrics' audit counters are counted along audit_uncommon_action_idx, which holds
    # no routine record: a counted action that became routine would be counted by a scan
    # of the whole log at every scrape.
    from audit.actions import ROUTINE_ACTIONS
    from observability.metrics import AUDIT_COUNTERS

    counted = {action for _, action in AUDIT_COUNTERS.values()}
    assert counted and not counted & set(ROUTINE_ACTIONS)


@pytest.mark.django_db
def test_the_audit_filter_finds_routine_and_uncommon_actions_alike(script):
    # The filter by action reads the uncommon ones from their index and the routine ones
    # by walking the log newest first: both answer.
    from audit.actions import AuditAction
    from audit.selectors import audit_records
    from runs.machine.errors import TransientError

    script.plan["create-task"] = [TransientError("503")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    successes = audit_records(action=AuditAction.SUCCEEDED)
    retries = audit_records(action=AuditAction.RETRY_SCHEDULED)
    assert [r.step_name for r in successes] == ["classify", "fetch"]
    assert [(r.run_id, r.step_name) for r in retries] == [(run.pk, "create-task")]
