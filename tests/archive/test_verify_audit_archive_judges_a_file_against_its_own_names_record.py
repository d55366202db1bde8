"""verify_audit --archive NAME judges the file against the record of NAME (its sha256, its
runs and their heads), not against whichever record its content's sha256 finds: a file whose
content was replaced by another genuine archive file's verifies on its seals, and judged by
its content it would pass, with its own runs' chains gone. The command names the file whose
content it holds and the runs it should hold. A copy under a name no file has is still
judged by its sha256, as before."""

import shutil

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from archive.models import ArchiveFile

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_files(finished_run):
    """Two genuine archive files, one run each: (first run, second run, file 1, file 2)."""
    first = finished_run(days=40)
    call_command("archive_runs")
    second = finished_run(days=40)
    call_command("archive_runs")
    one, two = ArchiveFile.objects.order_by("pk")
    assert list(one.heads) == [str(first.pk)] and list(two.heads) == [str(second.pk)]
    return first, second, one, two


def failure(name: str) -> str:
    with pytest.raises(CommandError) as failed:
        call_command("verify_audit", "--archive", name)
    return str(failed.value)


def test_a_file_whose_content_was_replaced_by_another_archive_files_is_named(
        two_files, archive_dir, capsys):
    first, second, one, two = two_files
    call_command("verify_audit", "--archive", one.name)
    capsys.readouterr()

    shutil.copy(archive_dir / two.name, archive_dir / one.name)

    message = failure(one.name)
    assert f"the file holds the content of another archive file, '{two.name}'" in message
    assert f"not that of '{one.name}'" in message
    assert f"run {first.pk} is recorded in the archive but missing from it" in message
    assert f"run {second.pk} is in the file but not recorded in its archive" in message
    assert "all chains intact" not in capsys.readouterr().out
    # The other file is left as it was, and still verifies under its own name.
    call_command("verify_audit", "--archive", two.name)
    assert "all chains intact" in capsys.readouterr().out


def test_a_local_copy_under_a_files_base_name_is_judged_against_that_files_record(
        two_files, archive_dir, tmp_path):
    first, _second, one, two = two_files
    copy = tmp_path / "downloaded" / one.name.rsplit("/", 1)[-1]
    copy.parent.mkdir()
    shutil.copy(archive_dir / two.name, copy)

    message = failure(str(copy))
    assert f"the file holds the content of another archive file, '{two.name}'" in message
    assert f"run {first.pk} is recorded in the archive but missing from it" in message


def test_a_genuine_copy_under_a_name_no_file_has_is_judged_by_its_sha256(
        two_files, archive_dir, tmp_path, capsys):
    _first, _second, one, _two = two_files
    copy = tmp_path / "downloaded-copy.jsonl.gz"
    shutil.copy(archive_dir / one.name, copy)

    call_command("verify_audit", "--archive", str(copy))
    out = capsys.readouterr().out
    assert "against its seals and its recorded sha256 and chain heads" in out
    assert "all chains intact" in out
