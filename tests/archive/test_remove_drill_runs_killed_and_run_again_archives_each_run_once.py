"""remove_drill_runs is safe to run again after it was killed: the file a killed removal
recorded is finished first, as an archiving pass finishes it (finish_unfinished). Before, the
command wrote that file's remaining drill runs to a second file and removed them through it:
those runs were closed by two archive files, and the first file's removal was finished by
the next archiving pass as if it had kept none. A real `manage.py remove_drill_runs` is
SIGKILLed after its first removal batch."""

import os
import signal

import pytest
from django.core.management import call_command

from archive.models import ArchivedRun, ArchiveFile, ArchiveRemoval
from runs.models import Run
from tests.factories import new_run
from tests.processes import manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 120


def test_a_killed_removal_run_again_archives_each_drill_run_once(archive_dir):
    ids = {new_run(wake=False, drill=True).pk for _ in range(RUNS)}

    process = manage("remove_drill_runs", ARCHIVE_REMOVE_BATCH=3, ARCHIVE_RUNS_PER_FILE=200,
                     VAR_DIR=archive_dir.parent)
    wait_for(ArchiveRemoval.objects.exists, timeout=120, interval=0.01,
             what="the first removal")
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    assert Run.objects.filter(pk__in=ids).exists(), "killed too late to prove anything"

    call_command("remove_drill_runs")  # as the operator does: run it again

    assert not Run.objects.filter(pk__in=ids).exists()
    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == ids
    claimed = {}
    for archive in ArchiveFile.objects.all():
        for run_id in archive.heads:
            if int(run_id) not in (archive.kept_run_ids or []):
                claimed.setdefault(int(run_id), []).append(archive.name)
    twice = {run_id: names for run_id, names in claimed.items() if len(names) > 1}
    assert not twice, f"{len(twice)} drill runs are closed by two archive files"
    assert not ArchiveFile.objects.filter(removal_finished_at=None).exists()
