from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run

DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def archive_dir(settings, tmp_path):
    """Archive files go to this test's own directory (the default file system storage
    under VAR_DIR/archive)."""
    settings.VAR_DIR = tmp_path
    settings.RUNS_RETENTION_DAYS = 30
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items() if k != "archive"}
    return tmp_path / "archive"


def age(run: Run, *, days: float, status: str | None = None) -> Run:
    """Make a run look as if it finished (and last changed) `days` ago."""
    then = timezone.now() - days * DAY
    fields = {"updated_at": then, "finished_at": then}
    if status:
        fields["status"] = status
    Run.objects.filter(pk=run.pk).update(**fields)
    return Run.objects.get(pk=run.pk)


@pytest.fixture
def finished_run():
    """finished_run(days=..., workflow=...): a run advanced to completion in this process
    (its effects recorded by tests.workflows.script), then aged."""

    def make(*, days: float = 40, workflow: str = "test-orders", **input_overrides) -> Run:
        run = new_run(workflow, **input_overrides)
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
        return age(run, days=days)

    return make


@contextmanager
def triggers_off():
    """Inside, this connection's writes fire no trigger: what a superuser (the only role
    that may) could do to the tables behind the application's back."""
    with connection.cursor() as cursor:
        cursor.execute("SET session_replication_role = replica")
        try:
            yield
        finally:
            cursor.execute("SET session_replication_role = origin")
