"""verify_audit --archive NAME with a NAME that is no archive file says so, naming NAME and
why: not on disk and outside the archive storage (an absolute path, a path up through ..),
or a directory (on disk or in the storage). Never a traceback, and nothing is written."""

import gzip

import pytest
from django.core.management import CommandError, call_command

from archive.models import ArchiveFile
from audit.models import AccessRecord, AuditRecord

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path, monkeypatch):
    """The default archive storage (VAR_DIR/archive) in this test's directory, which the
    command is run from, with a directory runs/2026 in it."""
    settings.VAR_DIR = tmp_path / "var"
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    (tmp_path / "var" / "archive" / "runs" / "2026").mkdir(parents=True)
    (tmp_path / "cwd" / "runs").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path / "var" / "archive"


def _refused(name) -> str:
    before = (AuditRecord.objects.count(), AccessRecord.objects.count(),
              ArchiveFile.objects.count())
    with pytest.raises(CommandError) as refused:
        call_command("verify_audit", "--archive", name)
    assert (AuditRecord.objects.count(), AccessRecord.objects.count(),
            ArchiveFile.objects.count()) == before
    return str(refused.value)


@pytest.mark.parametrize("name", ["/nonexistent", "../../etc/x", "runs/../../x.jsonl.gz"])
def test_a_name_outside_the_archive_storage_not_on_disk_is_named(name):
    assert _refused(name) == (f"no archive file {name!r} on disk, and the name leads outside "
                              "the archive storage")


def test_a_directory_in_the_archive_storage_is_named_as_one():
    assert _refused("runs/2026") == ("'runs/2026' is a directory in the archive storage, not "
                                     "an archive file")


def test_a_directory_on_disk_is_named_as_one():
    assert _refused("runs") == "'runs' is a directory, not an archive file"


def test_a_name_nowhere_is_still_said_to_be_nowhere():
    assert _refused("runs/2026/none.jsonl.gz") == ("no archive file 'runs/2026/none.jsonl.gz' "
                                                   "on disk or in the archive storage")


def test_a_name_longer_than_the_file_system_takes_is_named_shortened():
    message = _refused("a" * 300)
    assert message == (f"no archive file '{'a' * 255}'... (300 characters): File name too "
                       "long")


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_name_is_refused_instead_of_verifying_the_database(name):
    assert _refused(name) == ("--archive needs a file name; without --archive the "
                              "database's chains are verified")


def test_json_nested_deeper_than_the_decoder_goes_is_a_problem_not_a_traceback(tmp_path):
    deep = tmp_path / "deep.jsonl.gz"
    with gzip.open(deep, "wb") as handle:
        handle.write(b"[" * 100_000 + b"]" * 100_000 + b"\n")
    message = _refused(str(deep))
    assert "the archive cannot be read" in message and "recursion" in message


@pytest.mark.parametrize(("line", "kind"), [("[1, 2]", "array"), ('"run"', "string"),
                                          ("7", "number"), ("null", "null")])
def test_a_line_that_is_not_a_json_object_is_named_by_its_number(line, kind, tmp_path):
    path = tmp_path / "odd.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write('{"archive": {"format": 2}}\n' + line + "\n")
    message = _refused(str(path))
    assert f"line 2 of the archive is a JSON {kind}, not an object" in message
    assert "has no attribute" not in message
