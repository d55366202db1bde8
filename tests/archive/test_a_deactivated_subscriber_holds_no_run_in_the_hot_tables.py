"""A deactivated subscriber holds no run in the hot tables: deactivating is how an admin
stops a subscriber, and one switched off for good must not keep every run of its workflows
hot for ever. Its run's deliveries leave with the run and the file keeps them as they were
(pending, never sent). An active subscriber's deliveries of the same run still hold it."""

import gzip
import json

import pytest
from django.utils import timezone

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from archive.archiving import archive_runs
from archive.models import ArchivedRun
from runs.definitions import definition
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run
from tests.receiver import ScriptedReceiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    with ScriptedReceiver() as r:
        yield r


def test_a_deactivated_subscribers_pending_deliveries_hold_no_run(receiver, monkeypatch,
                                                                    archive_dir):
    monkeypatch.setattr(definition.registry.latest("test-orders"), "retention_days", 0)
    subscriber = WebhookSubscriber.objects.create(name="crm", url=f"{receiver.url}/hooks",
                                                  secret="k", **webhook_cursors.cursors_at_head())
    receiver.answer("POST", "/hooks", 503)
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    webhooks.publish(now=timezone.now())
    queued = WebhookDelivery.objects.filter(subscriber=subscriber, status="pending").count()
    assert queued >= 2
    assert archive_runs(actor="test").runs_held == 1

    WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=False)
    report = archive_runs(actor="test")

    assert (report.runs_removed, report.runs_held) == (1, 0)
    assert not Run.objects.filter(pk=run.pk).exists()
    tombstone = ArchivedRun.objects.get(original_run_id=run.pk)
    with gzip.open(archive_dir / tombstone.archive_file.name, "rt") as handle:
        line = [json.loads(text) for text in handle][1]
    assert [d["status"] for d in line["webhook_deliveries"]] == ["pending"] * queued
    assert len(receiver.sent("POST", "/hooks")) == queued  # the one try each, answered 503
