"""A finished run whose webhook deliveries an active subscriber has not had yet stays in the
hot tables, whatever its retention: archiving it would delete them unsent. The pass that
finds it so leaves it; the one after its deliveries went out archives it. The receiver is a
real HTTP server behind a real TCP link that is cut (the receiver is down) and restored."""

import gzip
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from archive.archiving import archive_runs
from archive.models import ArchivedRun
from runs.definitions import definition
from runs.execution import executor
from runs.models import Run, RunStatus
from tests.cuttable_proxy import cuttable_proxy
from tests.factories import new_run
from tests.receiver import ScriptedReceiver

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    with ScriptedReceiver() as r:
        yield r


@pytest.fixture
def link(receiver):
    """The TCP link to the receiver, which a test cuts (the receiver is down)."""
    with cuttable_proxy("127.0.0.1", receiver.server.server_address[1]) as proxy:
        yield proxy


@pytest.fixture
def kept_no_day(monkeypatch):
    monkeypatch.setattr(definition.registry.latest("test-orders"), "retention_days", 0)


def subscribe(url: str) -> WebhookSubscriber:
    return WebhookSubscriber.objects.create(name="crm", url=url, secret="k",
                                            **webhook_cursors.cursors_at_head())


def finished() -> Run:
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    return run


def test_a_delivery_retried_while_its_receiver_is_down_holds_its_run_until_it_arrives(
        receiver, link, kept_no_day, archive_dir):
    subscriber = subscribe(f"http://127.0.0.1:{link.port}/hooks")
    run = finished()
    link.cut()
    now = timezone.now()
    webhooks.publish(now=now)
    queued = WebhookDelivery.objects.filter(subscriber=subscriber).count()
    assert queued >= 2  # its status changes and step outcomes
    assert WebhookDelivery.objects.filter(status="pending", attempts=1).count() == 1

    report = archive_runs(actor="test")

    assert (report.runs_removed, report.runs_held) == (0, 1)
    assert Run.objects.filter(pk=run.pk).exists()
    assert not ArchivedRun.objects.exists()
    assert WebhookDelivery.objects.filter(subscriber=subscriber,
                                          status="pending").count() == queued

    # Still retried, still down.
    webhooks.publish(now=now + timedelta(minutes=5))
    assert WebhookDelivery.objects.filter(status="pending", attempts=2).count() == 1
    assert receiver.sent("POST", "/hooks") == []
    assert archive_runs(actor="test").runs_held == 1

    link.restore()
    sent = webhooks.publish(now=now + timedelta(minutes=10))

    assert sent.delivered == queued
    assert len(receiver.sent("POST", "/hooks")) == queued  # each exactly once
    assert WebhookDelivery.objects.filter(status="delivered").count() == queued

    call_command("archive_runs")

    assert not Run.objects.filter(pk=run.pk).exists()
    tombstone = ArchivedRun.objects.get(original_run_id=run.pk)
    with gzip.open(archive_dir / tombstone.archive_file.name, "rt") as handle:
        line = [json.loads(text) for text in handle][1]
    assert [d["status"] for d in line["webhook_deliveries"]] == ["delivered"] * queued
    assert not WebhookDelivery.objects.exists()
    assert len(receiver.sent("POST", "/hooks")) == queued


def test_events_a_subscribers_cursor_has_not_reached_hold_their_run(
        receiver, kept_no_day):
    subscribe(f"{receiver.url}/hooks")
    run = finished()  # the publisher has not run since

    report = archive_runs(actor="test")

    assert (report.runs_removed, report.runs_held) == (0, 1)
    assert Run.objects.filter(pk=run.pk).exists()
    queued = webhooks.publish().delivered
    assert queued >= 2 and len(receiver.sent("POST", "/hooks")) == queued
    assert archive_runs(actor="test").runs_removed == 1


def test_a_delivery_given_up_by_the_retry_policy_holds_its_run_no_longer(
        receiver, kept_no_day):
    subscriber = subscribe(f"{receiver.url}/hooks")
    run = finished()
    webhook_cursors.queue_deliveries()
    WebhookDelivery.objects.filter(subscriber=subscriber).update(status="failed")

    assert archive_runs(actor="test").runs_removed == 1
    assert not Run.objects.filter(pk=run.pk).exists()
    assert receiver.sent("POST", "/hooks") == []


def test_a_subscriber_of_other_workflows_holds_no_run(receiver, kept_no_day):
    WebhookSubscriber.objects.create(name="crm", url=f"{receiver.url}/hooks", secret="k",
                                     workflows=["test-saga"], **webhook_cursors.cursors_at_head())
    run = finished()

    assert archive_runs(actor="test").runs_removed == 1
    assert not Run.objects.filter(pk=run.pk).exists()


def test_a_dry_run_does_not_count_a_held_run(receiver, kept_no_day, capsys):
    subscribe(f"{receiver.url}/hooks")
    finished()

    call_command("archive_runs", "--dry-run")

    assert "dry run: 0 runs would be archived" in capsys.readouterr().out
