"""archive_runs refuses a number it cannot work with, naming the option and the range it
takes, before anything is read or written: a retention longer than a hundred years (which
would put the cut before the first day a date holds), a count of runs larger than the
database's bigint. Never a traceback; a number in range still works."""

import pytest
from django.core.management import CommandError, call_command
from django.db import DataError

from archive import archiving
from archive.models import ArchiveFile
from runs.models import Run

pytestmark = pytest.mark.django_db

BIGINT = 2**63 - 1


@pytest.mark.parametrize("days", ["3000000", "99999999999", "36501", "-1"])
def test_a_retention_out_of_range_is_refused_naming_the_range(finished_run, days):
    run = finished_run(days=40)
    with pytest.raises(CommandError,
                       match=f"^--older-than-days must be a whole number from 0 to 36500, not "
                             f"{int(days)}; no run is a hundred years old; nothing was done$"):
        call_command("archive_runs", "--older-than-days", days, "--dry-run")
    with pytest.raises(CommandError,
                       match="^--older-than-days must be a whole number from 0 to 36500"):
        call_command("archive_runs", "--older-than-days", days)
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()


@pytest.mark.parametrize("option", ["--max-runs", "--batch", "--remove-batch"])
@pytest.mark.parametrize("count", [str(BIGINT + 1), "99999999999999999999", "0"])
def test_a_count_of_runs_out_of_range_is_refused_naming_the_range(finished_run, option,
                                                                  count):
    run = finished_run(days=40)
    for dry_run in (["--dry-run"], []):
        with pytest.raises(CommandError, match=f"^{option} must be a whole number from 1 to "
                                               f"{BIGINT}, not {int(count)}; nothing was done$"):
            call_command("archive_runs", option, count, *dry_run)
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()


def test_the_ends_of_the_ranges_are_taken(finished_run, capsys):
    finished_run(days=40)
    call_command("archive_runs", "--older-than-days", "36500", "--max-runs", str(BIGINT),
                 "--batch", str(BIGINT), "--remove-batch", str(BIGINT), "--dry-run")
    assert "dry run: 0 runs would be archived" in capsys.readouterr().out
    call_command("archive_runs", "--older-than-days", "0", "--max-runs", str(BIGINT),
                 "--batch", str(BIGINT), "--remove-batch", str(BIGINT))
    assert not Run.objects.exists() and ArchiveFile.objects.count() == 1


@pytest.mark.parametrize("actor", ["ops-\udcff", "ops-\x00"])
def test_an_actor_the_database_cannot_store_is_refused_by_name(finished_run, actor):
    run = finished_run(days=40)
    with pytest.raises(CommandError, match="^--actor: .*Nothing was done.$"):
        call_command("archive_runs", "--actor", actor, "--older-than-days", "1")
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()


@pytest.mark.parametrize("actor", ["admin\nforged line 1", "ops\tcron", "ops\u202eevil"])
def test_an_actor_with_control_characters_is_refused_before_anything_is_archived(
        finished_run, archive_dir, actor):
    # The name is one line of each archived run's record: a line break would forge another.
    run = finished_run(days=40)
    with pytest.raises(CommandError, match="^--actor must not contain control characters"):
        call_command("archive_runs", "--actor", actor, "--older-than-days", "1")
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()
    assert not [p for p in archive_dir.rglob("*") if p.is_file()]


def test_an_actor_too_long_to_record_is_refused_and_the_longest_is_taken(finished_run,
                                                                        archive_dir):
    run = finished_run(days=40)
    with pytest.raises(CommandError, match="^--actor is 178 characters; at most 177. "
                                           "Nothing was done.$"):
        call_command("archive_runs", "--actor", "a" * 178, "--older-than-days", "1")
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()
    assert not [p for p in archive_dir.rglob("*") if p.is_file()]
    call_command("archive_runs", "--actor", "a" * 177, "--older-than-days", "1")
    assert ArchiveFile.objects.get().created_by == f"archive_runs command ({'a' * 177})"


def test_an_archive_folder_that_cannot_be_written_is_named_without_a_traceback(
        finished_run, settings, tmp_path):
    run = finished_run(days=40)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the archive folder should be")
    settings.VAR_DIR = blocked  # the archive folder would be under a file
    with pytest.raises(CommandError, match="^the archive storage refused a file: .*Not a "
                                           "directory.*stay in the hot tables$"):
        call_command("archive_runs", "--older-than-days", "1")
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_file_whose_row_the_database_refuses_is_not_left_behind(finished_run,
                                                                  archive_dir):
    run = finished_run(days=40)
    # Past the command's check: a name longer than the row's column takes.
    with pytest.raises(DataError):
        archiving.archive_runs(actor="a" * 300, older_than_days=1)
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()
    assert not [p for p in archive_dir.rglob("*") if p.is_file()]
