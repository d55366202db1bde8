"""On an archive storage other than the local file system (S3 and the like: no rename), a
file is saved after a marker partial/<base name> naming it, and the marker is deleted once
the file is recorded. A write killed in between leaves the marker: a pass an hour later
deletes it, with the file it names when no row records that file (part of a file, or a
whole one whose row was never written), never a recorded one."""

import os
import time
from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import FileSystemStorage, Storage

from archive import archiving
from archive.models import ArchiveFile

pytestmark = pytest.mark.django_db(transaction=True)


class ObjectStorage(Storage):
    """A storage the archive cannot rename in, as an object store: it keeps its objects in
    a directory so that a test can date them."""

    def __init__(self, location):
        self.disk = FileSystemStorage(location=location)

    def _save(self, name, content):
        return self.disk.save(name, content)

    def _open(self, name, mode="rb"):
        return self.disk.open(name, mode)

    def delete(self, name):
        self.disk.delete(name)

    def exists(self, name):
        return self.disk.exists(name)

    def listdir(self, path):
        return self.disk.listdir(path)

    def size(self, name):
        return self.disk.size(name)

    def get_modified_time(self, name):
        return self.disk.get_modified_time(name)


@pytest.fixture
def objects(settings, tmp_path) -> Path:
    location = tmp_path / "objects"
    settings.STORAGES = {**settings.STORAGES, "archive": {
        "BACKEND": f"{__name__}.ObjectStorage", "OPTIONS": {"location": str(location)}}}
    return location


def _left_by_a_killed_write(objects: Path, name: str, *, hours: float) -> tuple[Path, Path]:
    """The marker and the file a write killed before its row left, written `hours` ago."""
    marker, file = objects / "partial" / Path(name).name, objects / name
    for path, body in ((marker, name.encode()), (file, b"\x1f\x8b\x08\x00 cut short")):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        then = time.time() - hours * 3600
        os.utime(path, (then, then))
    return marker, file


def test_a_file_no_row_records_goes_with_its_marker_an_hour_on(objects):
    old = _left_by_a_killed_write(objects, "runs/2026/01/31/runs-1-3-101010-0a.jsonl.gz",
                                  hours=1.1)
    new = _left_by_a_killed_write(objects, "runs/2026/01/31/runs-4-6-111111-0b.jsonl.gz",
                                  hours=0.5)

    report = archiving.archive_runs(actor="test")

    assert report.partial_files_removed == 2
    assert [p.exists() for p in old] == [False, False]
    assert [p.exists() for p in new] == [True, True]


def test_a_recorded_file_stays_when_its_marker_goes(objects, finished_run):
    finished_run(days=40)
    archiving.archive_runs(actor="test")
    archive = ArchiveFile.objects.get()
    assert os.listdir(objects / "partial") == []  # its marker went once it was recorded
    # Killed after its row was written, before its marker was deleted.
    marker = objects / "partial" / Path(archive.name).name
    ObjectStorage(objects).save(f"partial/{marker.name}", ContentFile(archive.name.encode()))
    then = time.time() - 2 * 3600
    os.utime(marker, (then, then))

    report = archiving.archive_runs(actor="test")

    assert report.partial_files_removed == 1
    assert not marker.exists()
    assert (objects / archive.name).stat().st_size == archive.size
