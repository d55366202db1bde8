"""The audit table stays append-only for every path but archival of archived runs."""

import pytest
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from archive.models import ArchivedRun, ArchiveFile
from audit.models import AppendOnlyError, AuditRecord
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def _sql(statement, *params):
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(statement, params)


def _declare(sha):
    _sql("SELECT set_config('audit.archival', %s, true)", sha)


def _file(sha: str, *closes) -> ArchiveFile:
    """A recorded archive file closing the chains of the runs `closes` at their heads."""
    heads = {str(run.pk): [run.audit_seq, run.audit_head]
             for run in (Run.objects.get(pk=r.pk) for r in closes)}
    return ArchiveFile.objects.create(name=f"runs/{sha}.jsonl.gz", sha256=sha, size=1,
                                      run_count=1, record_count=1, heads=heads,
                                      created_at=timezone.now(), created_by="test")


def _tombstone(run, archive):
    return ArchivedRun.objects.create(
        original_run_id=run.pk, workflow_id=run.workflow_id, workflow_name=run.workflow_name,
        workflow_version=1, business_key=run.business_key, input_hash=run.input_hash,
        final_status="completed", created_at=run.created_at, archived_at=timezone.now(),
        archive_file=archive)


def _refused(statement, *params):
    with pytest.raises(DatabaseError, match="append-only"):
        _sql(statement, *params)


def test_ordinary_delete_of_audit_records_is_still_refused():
    run = new_run()
    record = AuditRecord.objects.filter(run=run).first()

    with pytest.raises(AppendOnlyError):
        record.delete()
    with pytest.raises(AppendOnlyError):
        AuditRecord.objects.filter(run=run).delete()
    _refused("DELETE FROM audit_auditrecord WHERE run_id = %s", run.pk)
    assert AuditRecord.objects.filter(run=run).count() >= 1


def test_the_archival_setting_alone_does_not_open_the_table():
    """Declaring an archive file is not enough: the run must be tombstoned to that file."""
    run = new_run()
    _file("a" * 64)
    _declare("a" * 64)

    _refused("DELETE FROM audit_auditrecord WHERE run_id = %s", run.pk)


def test_the_archival_setting_opens_only_the_runs_of_its_own_file():
    run, other = new_run(), new_run()
    _tombstone(run, _file("b" * 64, run))
    _tombstone(other, _file("c" * 64, other))
    _declare("b" * 64)

    _refused("DELETE FROM audit_auditrecord WHERE run_id = %s", other.pk)
    _sql("DELETE FROM audit_auditrecord WHERE run_id = %s", run.pk)
    assert not AuditRecord.objects.filter(run=run).exists()
    assert AuditRecord.objects.filter(run=other).exists()


def test_updates_stay_refused_even_on_the_archival_path():
    run = new_run()
    _tombstone(run, _file("d" * 64))
    _declare("d" * 64)

    _refused("UPDATE audit_auditrecord SET reason = 'rewritten' WHERE run_id = %s", run.pk)
    with pytest.raises(AppendOnlyError):
        AuditRecord.objects.filter(run=run).update(reason="rewritten")
