"""An archive_runs process SIGKILLed while it removes runs (its file written and recorded,
some batches committed): nothing is lost or removed twice. The runs of the killed batch
stay whole in the hot tables, the next pass finishes the file and archives the rest, and
every chain verifies, in the database and in each file."""

import os
import signal

import pytest
from django.core.management import call_command

from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from audit.models import AuditRecord
from runs.models import Run, Step
from tests.processes import manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 120


def test_the_next_pass_finishes_what_the_killed_one_left(finished_run, archive_dir):
    ids = {finished_run(days=40).pk for _ in range(RUNS)}
    steps = Step.objects.filter(run_id__in=ids).count()

    process = manage("archive_runs", "--batch", "30", "--remove-batch", "3",
                     RUNS_RETENTION_DAYS=30, VAR_DIR=archive_dir.parent)
    wait_for(ArchiveRemoval.objects.exists, timeout=120, interval=0.01,
             what="the first removal")
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)

    hot = set(Run.objects.filter(pk__in=ids).values_list("pk", flat=True))
    tombstoned = set(ArchivedRun.objects.values_list("original_run_id", flat=True))
    assert hot, "the pass ended before it was killed: this test would prove nothing"
    assert hot | tombstoned == ids and not hot & tombstoned
    assert ArchiveFile.objects.filter(removal_finished_at=None).exists()
    # A hot run is whole: its steps and its chain are all there.
    assert Step.objects.filter(run_id__in=hot).count() * RUNS == steps * len(hot)
    call_command("verify_audit")

    call_command("archive_runs")

    assert not Run.objects.filter(pk__in=ids).exists()
    assert not AuditRecord.objects.filter(run_id__in=ids).exists()
    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == ids
    assert not ArchiveFile.objects.filter(removal_finished_at=None).exists()
    assert sum(ArchiveRemoval.objects.values_list("run_count", flat=True)) == RUNS
    for archive in ArchiveFile.objects.all():
        call_command("verify_audit", "--archive", str(archive_dir / archive.name))
    call_command("verify_audit")
