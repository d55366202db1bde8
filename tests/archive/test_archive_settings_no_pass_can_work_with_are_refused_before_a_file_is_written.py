"""Archive settings no pass can work with (a removal batch of 0, files of 0 runs, a negative
maximum or retention) are refused by name before anything is written: a removal batch of 0
used to fail only once the first file was recorded, leaving it unfinished, and then fail
every later pass finishing it."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from archive.models import ArchivedRun, ArchiveFile
from runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("name", "value"), [("ARCHIVE_REMOVE_BATCH", 0),
                                             ("ARCHIVE_RUNS_PER_FILE", 0),
                                             ("ARCHIVE_MAX_RUNS_PER_PASS", -1),
                                             ("RUNS_RETENTION_DAYS", -5)])
def test_a_setting_out_of_range_is_named_and_nothing_is_written(finished_run, settings,
                                                                archive_dir, name, value):
    run = finished_run(days=40)
    setattr(settings, name, value)

    with pytest.raises(CommandError, match=rf"^{name} is {value}; it must be \d or more\. "
                                           r"Nothing was archived\.$"):
        call_command("archive_runs")

    assert not ArchiveFile.objects.exists() and not ArchivedRun.objects.exists()
    assert Run.objects.filter(pk=run.pk).exists()
    assert not archive_dir.exists() or not any(archive_dir.rglob("*.gz"))
