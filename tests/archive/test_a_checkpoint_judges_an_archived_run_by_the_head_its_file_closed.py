"""A run archived after a checkpoint of the audit heads has left the hot tables with its
chain: `audit_checkpoint check` then judges it by the head its archive file closed (kept in
the database with the file), so archiving is not taken for a chain emptied, and a chain set
back before it was archived still shows."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from archive.models import ArchivedRun, ArchiveFile
from audit.models import AuditRecord
from tests.archive.conftest import triggers_off

pytestmark = pytest.mark.django_db


def test_a_run_archived_since_the_checkpoint_still_holds_its_head(finished_run, tmp_path,
                                                                   capsys):
    run = finished_run(days=40)
    checkpoint = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(checkpoint))

    call_command("archive_runs")
    assert ArchivedRun.objects.filter(original_run_id=run.pk).exists()
    assert not AuditRecord.objects.filter(run_id=run.pk).exists()

    capsys.readouterr()
    call_command("audit_checkpoint", "check", str(checkpoint))
    assert "(1 of them closed by archive files)" in capsys.readouterr().out


def test_a_run_set_back_before_it_was_archived_is_named(finished_run, tmp_path):
    run = finished_run(days=40)
    checkpoint = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(checkpoint))
    call_command("archive_runs")

    # The file's recorded head as it would be had the chain been set back to seq 2 first.
    archive = ArchiveFile.objects.get()
    earlier = {str(run.pk): [2, "0" * 64]}
    with triggers_off():  # archive file records are kept as written (archive 0006)
        ArchiveFile.objects.filter(pk=archive.pk).update(heads=earlier)

    with pytest.raises(CommandError) as failed:
        call_command("audit_checkpoint", "check", str(checkpoint))
    assert (f"run {run.pk}: its archive file closed its chain at seq=2, before the "
            f"checkpoint's seq={run.audit_seq}") in str(failed.value)
