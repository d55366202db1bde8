"""A finished run another session holds (a psql prompt left idle in its transaction after
SELECT ... FOR UPDATE) stopped the whole archive pass: its removal waited for the row for
as long as it was held, and every other run of the pass with it. Now the pass passes over
it: the others are archived, the held one stays whole in the hot tables (kept by its file,
as a run that changed is), and the next pass archives it once. Every chain verifies, in
the database and in each file (a real archive_runs process; the other session is a real
one)."""

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


def test_the_pass_archives_the_others_and_the_next_pass_the_held_run(finished_run,
                                                                     archive_dir):
    first, held, last = (finished_run(days=40) for _ in range(3))
    records = AuditRecord.objects.filter(run=held).count()
    steps = Step.objects.filter(run=held).count()
    params = connection.settings_dict
    holder = psycopg.connect(dbname=params["NAME"], user=params["USER"] or None,
                             host=params["HOST"] or None, port=params["PORT"] or None)
    try:
        holder.execute("SELECT id FROM runs_run WHERE id = %s FOR UPDATE", [held.pk])
        # Without the fix the pass waits here for as long as the row is held, until
        # `succeeded` gives up on it.
        out = succeeded(manage("archive_runs", RUNS_RETENTION_DAYS=30,
                               VAR_DIR=archive_dir.parent), timeout=120)
    finally:
        holder.rollback()
        holder.close()

    assert "1 runs were held by another session" in out, out
    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == \
        {first.pk, last.pk}
    # The held run is whole: nothing of it was removed, no tombstone names it.
    assert Run.objects.filter(pk=held.pk).exists()
    assert AuditRecord.objects.filter(run=held).count() == records
    assert Step.objects.filter(run=held).count() == steps
    archive = ArchiveFile.objects.get()
    assert archive.kept_run_ids == [held.pk] and archive.removal_finished_at is not None
    assert ArchiveRemoval.objects.get().run_count == 2
    call_command("verify_audit", stdout=io.StringIO())
    call_command("verify_audit", "--archive", str(archive_dir / archive.name),
                 stdout=io.StringIO())

    call_command("archive_runs", stdout=io.StringIO())

    assert not Run.objects.filter(pk__in=[first.pk, held.pk, last.pk]).exists()
    assert not AuditRecord.objects.filter(run=held).exists()
    tombstone = ArchivedRun.objects.get(original_run_id=held.pk)
    assert tombstone.archive_file != archive
    assert ArchivedRun.objects.count() == 3
    assert sum(ArchiveRemoval.objects.values_list("run_count", flat=True)) == 3
    assert ArchiveFile.objects.count() == 2
    call_command("verify_audit", stdout=io.StringIO())
    for each in ArchiveFile.objects.all():
        call_command("verify_audit", "--archive", str(archive_dir / each.name),
                     stdout=io.StringIO())
