"""Archive passes that stop (beat down, the archive storage refusing files) let the hot
tables grow with nothing to say so. How long past its retention the first run due for
archiving has stayed is a gauge an alert reads (durable_archive_overdue_seconds): 0 while
none is due, a workflow's own retention counted, and 0 again once a pass archived it."""

import pytest

from archive.archiving import archive_runs
from observability.metrics import registry
from runs.definitions import definition
from tests.archive.conftest import age
from tests.factories import new_run

pytestmark = pytest.mark.django_db
GAUGE = "durable_archive_overdue_seconds"
DAY = 86400


def test_a_run_past_its_retention_is_overdue_until_a_pass_archives_it(finished_run):
    finished_run(days=10)  # within the 30 days
    assert registry.get_sample_value(GAUGE) == 0

    finished_run(days=32)
    assert registry.get_sample_value(GAUGE) == pytest.approx(2 * DAY, abs=120)

    assert archive_runs(actor="test").runs_removed == 1
    assert registry.get_sample_value(GAUGE) == 0


def test_a_workflows_own_retention_is_the_one_counted(finished_run, monkeypatch):
    monkeypatch.setattr(definition.registry.latest("test-saga"), "retention_days", 5)
    age(new_run("test-saga"), days=8, status="completed")
    assert registry.get_sample_value(GAUGE) == pytest.approx(3 * DAY, abs=120)
