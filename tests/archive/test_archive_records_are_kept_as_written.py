"""An archive file's record, a removal's record and a tombstone are kept as they were
written (archive 0006): the application's role could change a file's heads so that it
backed a forged tombstone, set its digest to another file's, or delete a tombstone, and
only `verify_audit --archive` on that very file told. Now each such change is refused by
the database, and nothing changes. Only a removal's end is written, once: a removal killed
half way is still finished by the next pass."""

import pytest
from django.core.management import call_command
from django.db import DatabaseError, connection, transaction

from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from audit.models import AuditRecord

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(finished_run):
    run = finished_run(days=40)
    call_command("archive_runs")
    archive = ArchiveFile.objects.get()
    assert archive.removal_finished_at is not None
    return archive, run


def _refused(statement, *params, match="refused"):
    with pytest.raises(DatabaseError, match=match), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(statement, params)


def _as_written():
    return (list(ArchiveFile.objects.order_by("pk").values()),
            list(ArchiveRemoval.objects.order_by("pk").values()),
            list(ArchivedRun.objects.order_by("pk").values()))


def test_an_archive_files_heads_digest_and_counts_are_not_rewritten(archived, finished_run):
    archive, _ = archived
    hot = finished_run(days=1)
    before = _as_written()
    forged_heads = {**archive.heads, str(hot.pk): [hot.audit_seq, hot.audit_head]}
    for column, value in [("heads", forged_heads), ("sha256", "0" * 64),
                          ("name", "runs/other.jsonl.gz"), ("run_count", 2)]:
        with pytest.raises(DatabaseError, match="archive file records are kept"):
            with transaction.atomic():
                ArchiveFile.objects.filter(pk=archive.pk).update(**{column: value})
    _refused("UPDATE archive_archivefile SET heads = heads || %s::jsonb WHERE id = %s",
             f'{{"{hot.pk}": [1, "x"]}}', archive.pk)
    _refused("DELETE FROM archive_archivefile WHERE id = %s", archive.pk)
    assert _as_written() == before
    call_command("verify_audit")


def test_a_removal_that_ended_is_not_written_again(archived):
    archive, _ = archived
    before = _as_written()
    _refused("UPDATE archive_archivefile SET removal_finished_at = NULL WHERE id = %s",
             archive.pk, match="has ended")
    _refused("UPDATE archive_archivefile SET kept_run_ids = '[1]' WHERE id = %s",
             archive.pk, match="has ended")
    assert _as_written() == before


def test_tombstones_and_removals_are_neither_changed_nor_deleted(archived):
    archive, run = archived
    before = _as_written()
    tombstone = ArchivedRun.objects.get(original_run_id=run.pk)
    _refused("UPDATE archive_archivedrun SET archive_file_id = %s WHERE id = %s",
             archive.pk, tombstone.pk)
    _refused("UPDATE archive_archivedrun SET final_status = 'terminated' WHERE id = %s",
             tombstone.pk)
    _refused("DELETE FROM archive_archivedrun WHERE id = %s", tombstone.pk)
    _refused("UPDATE archive_archiveremoval SET run_count = 0")
    _refused("DELETE FROM archive_archiveremoval")
    assert _as_written() == before
    assert not AuditRecord.objects.filter(run_id=run.pk).exists()
    call_command("verify_audit")
