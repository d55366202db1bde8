"""A checkpoint taken after an archive pass names no chain of the runs it archived (they
left the database's chains), so a database restored from a backup taken before that pass
(its runs hot again at an older head, the pass's file unrecorded) found every chain the
checkpoint named in place and passed. The checkpoint now names every archive file the
catalogue records, and its check names one the database no longer records."""

import gzip
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from tests.archive.conftest import triggers_off

pytestmark = pytest.mark.django_db


def restored_to_before_the_pass() -> None:
    """What the catalogue of a database restored from a backup taken before the pass holds:
    nothing of the pass (its runs are hot again; the check does not read them)."""
    with triggers_off():
        ArchivedRun.objects.all().delete()
        ArchiveRemoval.objects.all().delete()
        ArchiveFile.objects.all().delete()


def test_a_database_set_back_to_before_an_archive_pass_is_named_by_the_later_checkpoint(
        finished_run, tmp_path):
    finished_run(days=40)
    call_command("archive_runs")
    name = ArchiveFile.objects.get().name
    checkpoint = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(checkpoint))

    restored_to_before_the_pass()

    with pytest.raises(CommandError) as failed:
        call_command("audit_checkpoint", "check", str(checkpoint))
    message = str(failed.value)
    assert f"archive file '{name}': this database has no record of it" in message
    assert "Restoring the database from a backup" in message


def test_a_database_that_kept_its_archive_files_passes_and_says_how_many_it_checked(
        finished_run, tmp_path, capsys):
    finished_run(days=40)
    call_command("archive_runs")
    checkpoint = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(checkpoint))
    capsys.readouterr()

    call_command("audit_checkpoint", "check", str(checkpoint))
    assert ("every one of the 1 archive file(s) it names is still recorded"
            in capsys.readouterr().out)


def test_a_file_edited_to_leave_an_archive_file_out_fails_its_own_seal(finished_run, tmp_path):
    finished_run(days=40)
    call_command("archive_runs")
    checkpoint = tmp_path / "heads.jsonl.gz"
    call_command("audit_checkpoint", "write", str(checkpoint))
    with gzip.open(checkpoint, "rt") as handle:
        lines = [line for line in handle if "archive" not in json.loads(line)]
    edited = tmp_path / "edited.jsonl.gz"
    with gzip.open(edited, "wt") as handle:
        handle.writelines(lines)

    restored_to_before_the_pass()

    with pytest.raises(CommandError) as failed:
        call_command("audit_checkpoint", "check", str(edited))
    assert "was changed after it was written" in str(failed.value)
