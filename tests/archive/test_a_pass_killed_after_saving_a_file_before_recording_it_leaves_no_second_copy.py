"""An archive_runs process SIGKILLed after its file is saved under its name on the file
system, before the row that records it is committed: its runs stay hot and the next pass
archives them to a file of its own, so the killed pass's file holds the same runs under a
name like a real archive's, recorded nowhere. A pass an hour on deletes it: the archive
then holds each run in one file, the recorded one, as after a write killed midway."""

import os
import signal
import time

import pytest
from django.core.management import call_command

from archive import archiving
from archive.models import ArchivedRun, ArchiveFile
from runs.models import Run
from tests.processes import manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 3


def _archive_files(archive_dir):
    return sorted(p.relative_to(archive_dir).as_posix()
                  for p in (archive_dir / "runs").rglob("*") if p.is_file())


def _an_hour_passes(archive_dir):
    an_hour_ago = time.time() - 3600 - 60
    for path in (archive_dir / "partial").glob("*"):
        os.utime(path, (an_hour_ago, an_hour_ago))


def test_the_file_no_row_records_goes_and_each_run_is_in_one_file(finished_run, archive_dir,
                                                                   tmp_path):
    ids = {finished_run(days=40).pk for _ in range(RUNS)}
    saved = tmp_path / "saved"
    process = manage("archive_runs", RUNS_RETENTION_DAYS=30, VAR_DIR=archive_dir.parent,
                     RUNS_CRASH_AT="saved:archive_file", RUNS_CRASH_MARKER=saved)
    wait_for(saved.exists, timeout=120, what="the crash point after the file's save")
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)

    (unrecorded,) = _archive_files(archive_dir)
    assert not ArchiveFile.objects.exists()
    assert set(Run.objects.filter(pk__in=ids).values_list("pk", flat=True)) == ids

    call_command("archive_runs")
    _an_hour_passes(archive_dir)
    report = archiving.archive_runs(actor="test")

    (archive,) = ArchiveFile.objects.all()
    assert archive.name != unrecorded
    assert set(archive.heads) == {str(pk) for pk in ids}
    assert _archive_files(archive_dir) == [archive.name]
    assert report.files == [] and report.partial_files_removed >= 1
    assert list((archive_dir / "partial").glob("*")) == []
    assert not Run.objects.filter(pk__in=ids).exists()
    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == ids
    call_command("verify_audit", "--archive", str(archive_dir / archive.name))
    call_command("verify_audit")


def test_a_recorded_files_leftover_goes_and_the_file_stays(finished_run, archive_dir):
    ids = {finished_run(days=40).pk for _ in range(RUNS)}
    call_command("archive_runs")
    (archive,) = ArchiveFile.objects.all()
    # What a pass killed after the row's commit, before it tidied up, leaves.
    (archive_dir / "partial").mkdir(exist_ok=True)
    os.link(archive_dir / archive.name, archive_dir / "partial" / os.path.basename(archive.name))
    _an_hour_passes(archive_dir)

    report = archiving.archive_runs(actor="test")

    assert report.partial_files_removed == 1
    assert _archive_files(archive_dir) == [archive.name]
    assert list(os.listdir(archive_dir / "partial")) == []
    assert set(ArchivedRun.objects.values_list("original_run_id", flat=True)) == ids
    call_command("verify_audit", "--archive", str(archive_dir / archive.name))
