"""An archive file damaged in storage (a changed byte in its compressed stream, a line
that is not an object) is named as such: verify_audit fails with one line saying the file
cannot be read, and the console's page of an archived run says so instead of a server
error."""

import gzip
import json

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.urls import reverse

from archive.archiving import archive_runs
from archive.models import ArchiveFile

pytestmark = pytest.mark.django_db


@pytest.fixture
def archived(finished_run, archive_dir):
    """(the archived run, its file on disk)."""
    run = finished_run(days=40)
    assert archive_runs(actor="test").runs_removed == 1
    return run, archive_dir / ArchiveFile.objects.get().name


@pytest.fixture
def admin(client):
    client.force_login(User.objects.create_superuser("ada", password="pw"))
    return client


def _damage_compressed_stream(path) -> None:
    data = bytearray(path.read_bytes())
    assert data[3] == 0  # no optional gzip header fields: the deflate stream starts at 10
    data[10] |= 0b110  # the first block's type becomes 11, reserved: zlib refuses it
    path.write_bytes(bytes(data))


def test_verify_audit_names_a_damaged_compressed_stream(archived):
    run, path = archived
    _damage_compressed_stream(path)

    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--archive", str(path))

    assert "the archive cannot be read: Error -3 while decompressing data" in str(failed.value)
    assert "\n" not in str(failed.value)


def test_the_archived_run_page_says_its_file_cannot_be_read(archived, admin):
    run, path = archived
    _damage_compressed_stream(path)

    page = admin.get(reverse("console:archived_run", args=[run.pk]))

    assert page.status_code == 200
    assert "cannot be read: Error -3 while decompressing data" in page.context["problem"]


def test_a_line_that_is_not_an_object_does_not_stop_the_page(archived, admin):
    run, path = archived
    with gzip.open(path, "rt") as handle:
        lines = [json.loads(line) for line in handle]
    lines.insert(1, ["not", "a", "run"])
    with gzip.open(path, "wt") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)

    page = admin.get(reverse("console:archived_run", args=[run.pk]))

    assert page.status_code == 200
    assert page.context["detail"].run["id"] == run.pk


def test_a_run_row_no_archive_writes_is_named_on_the_page(archived, admin):
    run, path = archived
    with gzip.open(path, "rt") as handle:
        lines = [json.loads(line) for line in handle]
    lines[1]["steps"] = "not a list of steps"
    with gzip.open(path, "wt") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)

    page = admin.get(reverse("console:archived_run", args=[run.pk]))

    assert page.status_code == 200
    assert f"the row of run {run.pk} is not one an archive writes" in page.context["problem"]
