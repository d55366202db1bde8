"""A finished run whose own row another session holds (a step or an audit record locked FOR
UPDATE at a psql prompt left idle in its transaction), while the run's row itself is free:
the archive pass, which passes over a held run row, met the held row only in its DELETE and
waited for it without end, and every other run of the pass with it. Now that wait is
bounded (DB_LOCK_TIMEOUT): the batch is rolled back whole and removed a run at a time; the
others are archived, the run whose row is held stays whole in the hot tables (kept by its
file, as a held run is), and the next pass archives it, once. Every chain verifies, in the
database and in each file (a real archive_runs process; the other session is a real one)."""

import io

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection

from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from audit.models import AuditRecord
from runs.models import Run, Step
from tests.processes import manage, succeeded

pytestmark = pytest.mark.django_db(transaction=True)

HOLD = {
    "a step": "SELECT id FROM runs_step WHERE run_id = %s ORDER BY id LIMIT 1 FOR UPDATE",
    "an audit record": "SELECT id FROM audit_auditrecord WHERE run_id = %s ORDER BY seq "
                       "LIMIT 1 FOR UPDATE",
}


@pytest.mark.parametrize("held_row", HOLD)
def test_the_pass_archives_the_others_and_the_next_pass_the_run_whose_row_is_held(
        finished_run, archive_dir, held_row):
    first, held, last = (finished_run(days=40) for _ in range(3))
    records = AuditRecord.objects.filter(run=held).count()
    steps = Step.objects.filter(run=held).count()
    params = connection.settings_dict
    holder = psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                             host=params["HOST"] or None, port=params["PORT"] or None)
    try:
        assert holder.execute(HOLD[held_row], [held.pk]).fetchone()
        # Without the bound the pass waits on that row for as long as it is held, until
        # `succeeded` gives up on it.
        out = succeeded(manage("archive_runs", RUNS_RETENTION_DAYS=30, DB_LOCK_TIMEOUT=1,
                               VAR_DIR=archive_dir.parent), timeout=90)
        # Still held: the pass ended while the other session kept the row.
        assert holder.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    finally:
        holder.rollback()
        holder.close()

    assert "1 runs were held by another session" in out, out
    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == \
        {first.pk, last.pk}
    assert not Run.objects.filter(pk__in=[first.pk, last.pk]).exists()
    # The run whose row was held is whole: nothing of it was removed, no tombstone names it.
    assert Run.objects.filter(pk=held.pk).exists()
    assert AuditRecord.objects.filter(run=held).count() == records
    assert Step.objects.filter(run=held).count() == steps
    archive = ArchiveFile.objects.get()
    assert archive.kept_run_ids == [held.pk] and archive.removal_finished_at is not None
    # Removed a run at a time once the batch met the held row: one removal each.
    removals = list(ArchiveRemoval.objects.all())
    assert sum(r.run_count for r in removals) == 2
    assert {key for r in removals for key in r.heads} == {str(first.pk), str(last.pk)}
    call_command("verify_audit", stdout=io.StringIO())
    call_command("verify_audit", "--archive", str(archive_dir / archive.name),
                 stdout=io.StringIO())

    call_command("archive_runs", stdout=io.StringIO())

    assert not Run.objects.filter(pk=held.pk).exists()
    assert not AuditRecord.objects.filter(run=held).exists()
    assert not Step.objects.filter(run=held).exists()
    tombstone = ArchivedRun.objects.get(original_run_id=held.pk)
    assert tombstone.archive_file != archive
    assert ArchivedRun.objects.count() == 3
    assert sum(ArchiveRemoval.objects.values_list("run_count", flat=True)) == 3
    assert ArchiveFile.objects.count() == 2
    call_command("verify_audit", stdout=io.StringIO())
    for each in ArchiveFile.objects.all():
        call_command("verify_audit", "--archive", str(archive_dir / each.name),
                     stdout=io.StringIO())
