"""Every run is started with its first audit record in the same statement, so a run row
with no record and an empty head (seq 0, no hash, no seal) had both taken away: someone who
can switch the append-only trigger off deleted the whole chain and cleared the head to
match. verify_audit reads every run's head, not only those past seq 0, and names such a run
wherever it falls in id order, at the same one pass over the runs as before."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit.models import AuditRecord
from runs.execution import executor
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def empty_the_chain_and_its_head(run_id: int) -> None:
    """What a superuser can do with the triggers off: no record left, no head, no seal."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        cursor.execute("DELETE FROM audit_auditrecord WHERE run_id = %s", [run_id])
        cursor.execute("UPDATE runs_run SET audit_seq = 0, audit_head = '', audit_seal = '' "
                       "WHERE id = %s", [run_id])
        cursor.execute("SET session_replication_role = origin")


@pytest.mark.parametrize("emptied", [0, 1, 2], ids=["first", "between", "last"])
def test_a_run_whose_chain_was_emptied_with_its_head_is_named(emptied, capsys):
    runs = [new_run() for _ in range(3)]
    for run in runs:
        executor.advance_run(run.pk, worker="w1")
    call_command("verify_audit")
    assert "all chains intact" in capsys.readouterr().out
    victim = runs[emptied]

    empty_the_chain_and_its_head(victim.pk)
    assert Run.objects.filter(pk=victim.pk, audit_seq=0).exists()

    with pytest.raises(CommandError) as failed:
        call_command("verify_audit")
    message = str(failed.value)
    assert message.startswith(f"audit chain of run {victim.pk} has no records and its run "
                              "keeps no head (seq=0)")
    assert "its records were removed and its head cleared" in message
    # The other runs are untouched: neither named nor changed.
    for run in runs:
        if run is not victim:
            assert f"run {run.pk} " not in message
            assert AuditRecord.objects.filter(run_id=run.pk).exists()
    assert "all chains intact" not in capsys.readouterr().out


def test_a_run_emptied_alone_in_the_database_is_named():
    """No chain at all to stream beside it: the run's head alone tells."""
    run = new_run()
    empty_the_chain_and_its_head(run.pk)
    assert not AuditRecord.objects.exists()

    with pytest.raises(CommandError, match=f"audit chain of run {run.pk} has no records and "
                                           "its run keeps no head"):
        call_command("verify_audit")
