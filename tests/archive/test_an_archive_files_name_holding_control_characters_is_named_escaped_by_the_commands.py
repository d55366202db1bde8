"""The name of an archive file is the archive storage's answer (STORAGES "archive": a
bucket's prefix, a share's folder), recorded as it answered. A storage keeping its files
under a folder whose name holds control characters (a terminal's escape sequence, a line
break, a bell) has each command that names such a file (archive_runs, remove_drill_runs,
show_run, run_history, start_run) name it quoted, each such character written as its
escape, as the commands name a file a person gave (audit.quoting.file_name): printed as it
is, it recoloured the terminal and forged a line of the output. So does the reading of an
archived run that cannot be read (archive.reading, the console's page of it)."""

import io
import json

import pytest
from django.core.files.storage import FileSystemStorage, Storage
from django.core.management import CommandError, call_command

from archive.models import ArchivedRun, ArchiveFile
from archive.reading import ArchiveUnreadable, read_archived_run
from audit.chain import Actor
from runs.execution import executor
from runs.machine.transitions import start_run
from runs.models import Run, RunStatus
from tests.archive.conftest import age
from tests.factories import new_run

FOLDER = "night\x1b[31m shift\nforged line\x07"
SHOWN = r"night\x1b[31m shift\nforged line\x07"
INVOICE = {"tenant": "tenant-42", "invoice_number": "INV-1", "approver_email": "a@example.com"}


class FolderedStorage(Storage):
    """An archive storage that keeps each archive file under FOLDER and answers with the
    name it chose, the one the archive records (on disk, for the test to look at)."""

    def __init__(self, location):
        self.disk = FileSystemStorage(location=location)

    def get_available_name(self, name, max_length=None):
        # The archive files only: a partial/ marker is deleted by the name it was given.
        return f"{FOLDER}/{name}" if name.startswith("runs/") else name

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


@pytest.fixture
def storage(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    settings.RUNS_RETENTION_DAYS = 30
    settings.STORAGES = {**settings.STORAGES, "archive": {
        "BACKEND": f"{__name__}.FolderedStorage",
        "OPTIONS": {"location": str(tmp_path / "objects")}}}
    return tmp_path / "objects"


def shown_escaped(text: str) -> None:
    """`text` names the file escaped, on lines of their own: no control character in it
    but the line breaks that end its lines, and none of FOLDER's as they are."""
    assert not [c for c in text.rstrip("\n").replace("\n", "")
                if ord(c) < 32 or ord(c) == 127], text
    assert FOLDER not in text
    assert SHOWN in text


def archived() -> tuple[Run, str]:
    """A test-orders run, completed forty days ago and archived by archive_runs; what the
    command printed."""
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    age(run, days=40)
    out = io.StringIO()
    call_command("archive_runs", stdout=out)
    assert not Run.objects.filter(pk=run.pk).exists()
    return run, out.getvalue()


@pytest.mark.django_db
def test_archive_runs_names_the_file_it_wrote_escaped(storage):
    _, printed = archived()

    name = ArchiveFile.objects.get().name
    assert name.startswith(f"{FOLDER}/runs/")
    assert (storage / name).is_file()
    shown_escaped(printed)
    assert printed.startswith(f"wrote {name!r}\n")


@pytest.mark.django_db
@pytest.mark.parametrize("command", ["show_run", "run_history"])
def test_a_command_given_the_archived_runs_id_names_its_file_escaped(storage, command):
    run, _ = archived()
    name = ArchiveFile.objects.get().name

    with pytest.raises(CommandError) as refused:
        call_command(command, str(run.pk), stdout=io.StringIO())

    shown_escaped(str(refused.value))
    assert f"was archived to {name!r}" in str(refused.value)
    if command == "show_run":
        assert f"verify_audit --archive {name!r} checks it" in str(refused.value)


@pytest.mark.django_db
def test_start_run_for_the_archived_runs_key_names_its_file_escaped(storage):
    run, _ = archived()
    name = ArchiveFile.objects.get().name

    with pytest.raises(CommandError) as refused:
        call_command("start_run", run.workflow_name, run.business_key, "--input",
                     json.dumps({"order": run.business_key}), stdout=io.StringIO())

    shown_escaped(str(refused.value))
    assert f"archived to {name!r}; nothing was started" in str(refused.value)


@pytest.mark.django_db
def test_an_archived_run_whose_file_is_gone_is_said_unreadable_naming_it_escaped(storage):
    run, _ = archived()
    name = ArchiveFile.objects.get().name
    (storage / name).unlink()

    with pytest.raises(ArchiveUnreadable) as unreadable:
        read_archived_run(ArchivedRun.objects.get(original_run_id=run.pk))

    shown_escaped(str(unreadable.value))
    assert str(unreadable.value).startswith(f"archive file {name!r} cannot be read: ")


@pytest.mark.django_db(transaction=True)
def test_remove_drill_runs_names_the_files_it_archived_in_escaped(storage):
    start_run(workflow="invoice-approval", business_key="drill:1", input=INVOICE,
              actor=Actor.system("test"), wake=False, drill=True)
    out = io.StringIO()

    call_command("remove_drill_runs", stdout=out)

    name = ArchiveFile.objects.get().name
    shown_escaped(out.getvalue())
    assert out.getvalue() == f"1 drill run(s) removed, archived in {name!r}\n"
