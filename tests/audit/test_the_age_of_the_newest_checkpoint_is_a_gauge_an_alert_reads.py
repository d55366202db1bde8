"""Checkpoints of the chains' heads outside the database stop being taken when beat or its
worker stops, or the checkpoint storage refuses files, and nothing said so. Each one stored
is now named in the database (StoredCheckpoint, listed in the admin), and the age of the
newest is a gauge an alert reads: with none stored yet, the age of the oldest record it
would have covered; 0 when checkpoints are off."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from audit import tasks
from audit.models import AuditRecord, StoredCheckpoint
from observability.metrics import registry
from runs.execution import executor
from runs.models import RunStatus
from tests.admin.scale import bulk_runs
from tests.factories import new_run

pytestmark = pytest.mark.django_db
GAUGE = "durable_audit_checkpoint_age_seconds"
DAY = timedelta(days=1)


@pytest.fixture(autouse=True)
def checkpoint_dir(settings, tmp_path):
    settings.VAR_DIR = tmp_path
    settings.STORAGES = {k: v for k, v in settings.STORAGES.items()
                         if k != "audit_checkpoints"}
    settings.AUDIT_CHECKPOINT_INTERVAL_SECONDS = 86400
    return tmp_path / "audit-checkpoints"


@pytest.fixture
def records_a_day_old():
    """A record written a day ago (the log's first), then a run's whole chain now."""
    old = bulk_runs(["k-old"])[0]
    AuditRecord.objects.bulk_create([AuditRecord(
        run=old, seq=1, action="run_started", actor_kind="system", actor_label="test",
        created_at=timezone.now() - DAY, prev_hash="", hash="h")])
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return run


def test_with_none_stored_the_age_runs_from_the_oldest_record(records_a_day_old):
    assert not StoredCheckpoint.objects.exists()
    assert registry.get_sample_value(GAUGE) == pytest.approx(86400, abs=120)


def test_each_stored_checkpoint_is_named_and_the_newest_sets_the_age(records_a_day_old,
                                                                     checkpoint_dir, client):
    stored = tasks.write_checkpoint()

    row = StoredCheckpoint.objects.get()
    assert (row.name, row.chains) == (stored["name"], stored["chains"]) and row.chains >= 1
    assert (checkpoint_dir / row.name).exists()
    assert registry.get_sample_value(GAUGE) < 60
    # Listed in the admin, read-only.
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    listed = client.get("/admin/audit/storedcheckpoint/")
    assert listed.status_code == 200 and row.name in listed.content.decode()
    assert client.get("/admin/audit/storedcheckpoint/add/").status_code == 403


def test_a_checkpoint_the_storage_refuses_is_not_named(records_a_day_old, checkpoint_dir):
    checkpoint_dir.parent.joinpath("audit-checkpoints").write_text("a file, not a folder")
    with pytest.raises(OSError):
        tasks.write_checkpoint()
    assert not StoredCheckpoint.objects.exists()
    assert registry.get_sample_value(GAUGE) == pytest.approx(86400, abs=120)


def test_with_checkpoints_off_the_gauge_is_zero(records_a_day_old, settings):
    settings.AUDIT_CHECKPOINT_INTERVAL_SECONDS = 0
    assert registry.get_sample_value(GAUGE) == 0
