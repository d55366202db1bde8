"""A tombstone lets the archival path delete its run's audit records, so one the archive
file it names does not back would erase a hot run with its whole chain and leave nothing
behind to tell. The database refuses such a removal (archive migration 0005: the file's
heads must hold each removed run at its last removed record), and verify_audit names a
tombstone whose file does not hold its run, or kept it in the hot tables, however it came
to be (written before that migration, or by someone who switched the triggers off)."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from archive import parts
from archive.models import ArchivedRun, ArchiveFile
from audit.models import AuditRecord
from runs.models import Run
from tests.archive.conftest import triggers_off

pytestmark = pytest.mark.django_db(transaction=True)


def forge_tombstone(run: Run, archive: ArchiveFile) -> None:
    ArchivedRun.objects.create(
        original_run_id=run.pk, workflow_id=run.workflow_id, workflow_name=run.workflow_name,
        workflow_version=run.workflow_version, business_key=run.business_key,
        input_hash=run.input_hash, final_status=run.status, created_at=run.created_at,
        finished_at=run.finished_at, archived_at=timezone.now(), archive_file=archive)


def remove_through(archive: ArchiveFile, run: Run) -> None:
    """What the application's role may do, triggers on: the archival path, for `run`."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('audit.archival', %s, true)", [archive.sha256])
        forge_tombstone(run, archive)
        parts.remove([run.pk])


@pytest.fixture
def archived_and_hot(finished_run):
    """An archive file closing one run, and a run still hot (its retention not over)."""
    archived = finished_run(days=40)
    call_command("archive_runs")
    archive = ArchiveFile.objects.get()
    hot = finished_run(days=1)
    assert list(archive.heads) == [str(archived.pk)]
    call_command("verify_audit")
    return archive, hot


def test_removing_a_hot_run_through_a_tombstone_to_a_file_that_never_held_it_is_refused(
        archived_and_hot):
    archive, hot = archived_and_hot
    records = AuditRecord.objects.filter(run_id=hot.pk).count()

    with pytest.raises(DatabaseError, match=f"does not close the chain of run {hot.pk}"):
        remove_through(archive, hot)

    assert Run.objects.filter(pk=hot.pk).exists()
    assert AuditRecord.objects.filter(run_id=hot.pk).count() == records
    assert not ArchivedRun.objects.filter(original_run_id=hot.pk).exists()
    call_command("verify_audit")


def test_a_file_that_closed_a_run_at_an_earlier_head_does_not_let_its_later_records_go(
        archived_and_hot):
    archive, hot = archived_and_hot
    # The file holds the run, but at its first record: the records after it are in no file.
    first = AuditRecord.objects.get(run_id=hot.pk, seq=1)
    with triggers_off():  # archive file records are kept as written (archive 0006)
        ArchiveFile.objects.filter(pk=archive.pk).update(
            heads={**archive.heads, str(hot.pk): [first.seq, first.hash]})
    archive.refresh_from_db()

    with pytest.raises(DatabaseError, match=f"does not close the chain of run {hot.pk}"):
        remove_through(archive, hot)

    assert AuditRecord.objects.filter(run_id=hot.pk).count() == hot.audit_seq > 1


def test_a_tombstone_whose_file_does_not_hold_its_run_is_named_by_verify_audit(
        archived_and_hot, capsys):
    archive, hot = archived_and_hot
    archived_id = int(next(iter(archive.heads)))
    capsys.readouterr()
    # With the triggers off, as a superuser (or anyone before migration 0005) could.
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            remove_through(archive, hot)
        finally:
            cursor.execute("SET session_replication_role = origin")
    assert not Run.objects.filter(pk=hot.pk).exists()
    assert not AuditRecord.objects.filter(run_id=hot.pk).exists()

    with pytest.raises(CommandError) as failed:
        call_command("verify_audit")
    message = str(failed.value)
    assert message.startswith(f"archived run {hot.pk}: its tombstone names archive file "
                              f"'{archive.name}', but its archive file does not hold it")
    assert f"run {archived_id}" not in message  # the genuine tombstone beside it is not named
    assert "all chains intact" not in capsys.readouterr().out


def test_a_tombstone_to_a_file_that_kept_its_run_hot_is_named_by_verify_audit(
        archived_and_hot):
    archive, _hot = archived_and_hot
    archived_id = int(next(iter(archive.heads)))
    # The file holds the run, but says it kept it in the hot tables: no removal of this file
    # tombstoned it.
    with triggers_off():
        ArchiveFile.objects.filter(pk=archive.pk).update(kept_run_ids=[archived_id])

    with pytest.raises(CommandError, match=f"archived run {archived_id}: .* kept it in the "
                                           "hot tables"):
        call_command("verify_audit")


def test_verify_audit_counts_the_tombstones_it_checked(archived_and_hot, capsys):
    call_command("verify_audit")
    assert "verified 1 archived runs: each closed by the archive file its tombstone names" in (
        capsys.readouterr().out)
