"""An archive_runs process SIGKILLed in the middle of writing a file (part of it on disk,
no row recording it) leaves nothing under a name like a real archive file's: the part is
under partial/ in the storage's directory. The next pass archives the runs whole, in one
file, and a pass deletes what a killed write left once it is an hour old."""

import base64
import os
import signal
import time

import pytest
from django.core.management import call_command

from archive import archiving
from archive.models import ArchiveFile
from runs.models import Run
from tests.processes import manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = 3


def _noise() -> str:
    # Random text the compression cannot shrink: the file is several chunks long, so the
    # crash point between two chunks is reached with part of it written.
    return base64.b64encode(os.urandom(45_000)).decode()


def _archive_files(archive_dir):
    return sorted(p.relative_to(archive_dir).as_posix()
                  for p in (archive_dir / "runs").rglob("*") if p.is_file())


def test_a_file_cut_short_has_no_name_and_the_next_pass_writes_its_runs_whole(
        finished_run, archive_dir, tmp_path):
    ids = {finished_run(days=40, order=_noise()).pk for _ in range(RUNS)}
    crashed = tmp_path / "crashed"
    process = manage("archive_runs", RUNS_RETENTION_DAYS=30, VAR_DIR=archive_dir.parent,
                     RUNS_CRASH_AT="mid_write:archive_file", RUNS_CRASH_MARKER=crashed)
    wait_for(crashed.exists, timeout=120, what="the crash point within the file's write")
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)

    assert _archive_files(archive_dir) == []
    (partial,) = (archive_dir / "partial").iterdir()
    assert partial.stat().st_size > 0, "nothing was written: this test would prove nothing"
    assert not ArchiveFile.objects.exists()
    assert set(Run.objects.filter(pk__in=ids).values_list("pk", flat=True)) == ids

    call_command("archive_runs")

    (archive,) = ArchiveFile.objects.all()
    assert (archive.run_count, set(archive.heads)) == (RUNS, {str(pk) for pk in ids})
    assert _archive_files(archive_dir) == [archive.name]
    assert not Run.objects.filter(pk__in=ids).exists()
    call_command("verify_audit", "--archive", str(archive_dir / archive.name))


def test_a_pass_deletes_a_partial_file_an_hour_old_and_leaves_a_newer_one(archive_dir):
    (archive_dir / "partial").mkdir(parents=True)
    old = archive_dir / "partial" / "runs-1-3-101010-0123456789ab.jsonl.gz"
    new = archive_dir / "partial" / "runs-4-6-111111-ba9876543210.jsonl.gz"
    for part in (old, new):
        part.write_bytes(b"\x1f\x8b\x08\x00 cut short")
    an_hour_ago = time.time() - 3600 - 60
    os.utime(old, (an_hour_ago, an_hour_ago))

    report = archiving.archive_runs(actor="test")

    assert report.partial_files_removed == 1
    assert (old.exists(), new.exists()) == (False, True)
