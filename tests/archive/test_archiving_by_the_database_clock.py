"""A pass judges retention by the database's clock: run from a host whose clock runs days
ahead, it takes no run whose retention is not over."""

import pytest

from archive.models import ArchivedRun
from runs.models import Run
from tests.processes import manage

pytestmark = pytest.mark.django_db(transaction=True)

DAY = 24 * 3600


def test_a_pass_on_a_host_twenty_days_ahead_keeps_a_run_finished_fifteen_days_ago(
        finished_run, archive_dir):
    young = finished_run(days=15)  # retention: 30 days (tests.archive.conftest)
    old = finished_run(days=40)
    process = manage("archive_runs", RUNS_TEST_CLOCK_OFFSET_SECONDS=20 * DAY,
                     RUNS_RETENTION_DAYS=30, VAR_DIR=archive_dir.parent)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "archived 1 runs" in out
    assert Run.objects.filter(pk=young.pk).exists()
    assert not ArchivedRun.objects.filter(original_run_id=young.pk).exists()
    assert ArchivedRun.objects.filter(original_run_id=old.pk).exists()
