"""archive_runs refuses a number it cannot work with, naming the option and the range it
takes, before anything is read or written: a retention longer than a hundred years (which
would put the cut before the first day a date holds), a count of runs larger than the
database's bigint. Never a traceback; a number in range still works."""

import pytest
from django.core.management import CommandError, call_command

from archive.models import ArchiveFile
from runs.models import Run

pytestmark = pytest.mark.django_db

BIGINT = 2**63 - 1


@pytest.mark.parametrize("days", ["3000000", "99999999999", "36501", "-1"])
def test_a_retention_out_of_range_is_refused_naming_the_range(finished_run, days):
    run = finished_run(days=40)
    with pytest.raises(CommandError,
                       match=r"^--older-than-days must be between 0 and 36500 \(a hundred "
                             r"years\)$"):
        call_command("archive_runs", "--older-than-days", days, "--dry-run")
    with pytest.raises(CommandError, match="^--older-than-days must be between 0 and 36500"):
        call_command("archive_runs", "--older-than-days", days)
    assert Run.objects.filter(pk=run.pk).exists() and not ArchiveFile.objects.exists()


@pytest.mark.parametrize("option", ["--max-runs", "--batch", "--remove-batch"])
@pytest.mark.parametrize("count", [str(BIGINT + 1), "99999999999999999999", "0"])
def test_a_count_of_runs_out_of_range_is_refused_naming_the_range(finished_run, option,
                                                                  count):
    run = finished_run(days=40)
    for dry_run in (["--dry-run"], []):
        with pytest.raises(CommandError, match=f"^{option} must be between 1 and {BIGINT}$"):
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
