"""A subscriber an admin makes active again between the writing of an archive file and the
removal of its runs (a pass that stopped after recording the file, finished by the next)
has deliveries of those runs waiting: removal asks again under the runs' locks and keeps
them hot, as it keeps a run that changed since it was read. The next file takes them once
they are delivered."""

import pytest
from django.utils import timezone

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from archive import archiving
from archive.models import ArchiveFile
from runs.definitions import definition
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.factories import new_run
from tests.receiver import ScriptedReceiver

pytestmark = pytest.mark.django_db


def test_removal_keeps_a_run_whose_subscriber_came_back_after_its_file_was_written(
        monkeypatch):
    monkeypatch.setattr(definition.registry.latest("test-orders"), "retention_days", 0)
    with ScriptedReceiver() as receiver:
        subscriber = WebhookSubscriber.objects.create(
            name="crm", url=f"{receiver.url}/hooks", secret="k", active=False,
            **webhook_cursors.cursors_at_head())
        run = new_run()
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
        WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=True)
        webhook_cursors.queue_deliveries()
        WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=False)
        # The pass that wrote this file stopped before removing anything.
        archive = archiving.write_file([run.pk], actor="test", now=timezone.now())
        queued = WebhookDelivery.objects.filter(subscriber=subscriber).count()
        WebhookSubscriber.objects.filter(pk=subscriber.pk).update(active=True)

        report = archiving.archive_runs(actor="test")

        assert (report.runs_removed, report.runs_kept) == (0, 1)
        assert ArchiveFile.objects.get(pk=archive.pk).kept_run_ids == [run.pk]
        assert Run.objects.filter(pk=run.pk).exists()
        assert WebhookDelivery.objects.filter(status="pending").count() == queued

        assert webhooks.publish().delivered == queued
        assert archiving.archive_runs(actor="test").runs_removed == 1
        assert len(receiver.sent("POST", "/hooks")) == queued
