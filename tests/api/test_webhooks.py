"""Progress events: written in the transaction of each status change, delivered to
subscribers signed, with a delivery id, retried with backoff; a failing endpoint never
holds the runtime up."""

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from api import webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import RunEvent, RunStatus
from tests.factories import SYSTEM, make_due, new_run
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db


class Receiver(WebhookReceiver):
    """Answers 500 to the next `fail_next` deliveries, 204 after."""

    def __init__(self):
        self.fail_next = 0
        super().__init__(self._status)

    def _status(self, headers, body) -> int:
        self.fail_next -= 1
        return 500 if self.fail_next >= 0 else 204


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def _events(run):
    return list(RunEvent.objects.filter(run=run, step_name="").order_by("pk")
                .values_list("status_from", "status_to"))


def test_a_step_outcome_is_written_once_its_audit_record_and_told_from_it(receiver,
                                                                           script):
    from runs.machine.errors import TransientError

    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret="k")
    script.plan["create-task"] = [TransientError("503")]
    run = new_run()
    executor.advance_run(run.pk, worker="w1")  # one-statement successes and a retry
    # No second row for subscribers: only the run's status changes have events.
    assert not RunEvent.objects.filter(run=run).exclude(step_name="").exists()
    webhooks.publish()
    steps = [json.loads(body)["step"] for _, body in receiver.requests
             if b"run.step_completed" in body]
    assert [(s["name"], s["outcome"]) for s in steps] == [
        ("fetch", "succeeded"), ("classify", "succeeded"), ("create-task", "retry_scheduled")]
    delivered = WebhookDelivery.objects.filter(record__isnull=False)
    assert sorted(d.record.action for d in delivered) == sorted(
        ["succeeded", "succeeded", "retry_scheduled"])
    # Once each, however often the publisher runs; the next outcome is told in its turn.
    assert webhooks.publish().queued == 0
    make_due(run)  # the retry is due
    executor.advance_run(run.pk, worker="w1")
    assert webhooks.publish().queued >= 1
    told = [json.loads(body)["step"]["name"] for _, body in receiver.requests
            if b"run.step_completed" in body]
    assert told.count("fetch") == 1 and told.count("create-task") == 2


def test_every_status_change_writes_its_event_in_the_transition(script):
    run = new_run()
    assert _events(run) == [("new", "queued")]
    executor.advance_run(run.pk, worker="w1")  # the one-statement hot path included
    assert _events(run) == [("new", "queued"), ("queued", "running"),
                            ("running", "completed")]
    with pytest.raises(TransitionNotAllowed):
        transitions.resume(run.pk, actor=SYSTEM, reason="refused")
    assert len(_events(run)) == 3  # a refused transition writes nothing


def test_deliveries_are_signed_and_carry_a_delivery_id(receiver, script):
    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret="s3cret")
    run = new_run()
    executor.advance_run(run.pk, worker="w1")
    report = webhooks.publish()
    # Three status changes and four step outcomes (fetch, classify, create-task, post-ledger).
    assert (report.queued, report.delivered) == (7, 7)
    tos, steps = [], []
    for headers, body in receiver.requests:
        expected = "sha256=" + hmac.new(
            b"s3cret", headers["X-Webhook-Timestamp"].encode() + b"." + body,
            hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-Webhook-Signature"], expected)
        payload = json.loads(body)
        assert payload["delivery_id"] == headers["X-Webhook-Id"]
        assert payload["run"]["id"] == run.pk
        if payload["type"] == "run.step_completed":
            steps.append((payload["step"]["name"], payload["step"]["outcome"]))
        else:
            assert payload["type"] == "run.status_changed"
            tos.append(payload["to"])
    assert tos == ["queued", "running", "completed"]
    assert steps == [("fetch", "succeeded"), ("classify", "succeeded"),
                     ("create-task", "succeeded"), ("post-ledger", "succeeded")]
    assert webhooks.publish().queued == 0  # nothing twice


def test_a_failing_endpoint_gets_the_same_delivery_again_with_backoff(receiver, script):
    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret="k")
    run = new_run()
    receiver.fail_next = 2
    now = timezone.now()
    webhooks.publish(now=now)
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == "pending" and delivery.attempts == 1
    assert delivery.last_status_code == 500
    assert delivery.next_attempt_at == now + timedelta(seconds=2)
    # The runtime does not wait for the subscriber.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    webhooks.send_due(now=now + timedelta(seconds=1))  # not due yet: nothing sent
    assert len(receiver.requests) == 1
    webhooks.send_due(now=now + timedelta(seconds=2))
    assert WebhookDelivery.objects.get(pk=delivery.pk).next_attempt_at == \
        now + timedelta(seconds=2 + 4)
    webhooks.send_due(now=now + timedelta(seconds=6))
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 3
    ids = {h["X-Webhook-Id"] for h, _ in receiver.requests if b'"to":"queued"' in _}
    assert ids == {str(delivery.delivery_id)}


def test_a_subscriber_gets_only_its_workflows(receiver, script):
    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret="k",
                                     workflows=["customer-onboarding"])
    new_run()
    assert webhooks.publish().queued == 0
    assert receiver.requests == []


def test_the_webhook_backlog_is_a_metric(receiver, script):
    from prometheus_client import generate_latest

    from observability.metrics import registry

    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret="k")
    new_run()
    receiver.fail_next = 5
    webhooks.publish()
    text = generate_latest(registry).decode()
    assert "durable_webhook_backlog 1.0" in text
    assert "durable_webhook_failed 0.0" in text


@pytest.mark.django_db(transaction=True)
def test_two_passes_of_the_publisher_never_run_at_once(receiver, script):
    import psycopg
    from django.db import connection

    from runs.machine.single_pass import lock_key

    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret="k")
    new_run()
    db = connection.settings_dict
    other = psycopg.connect(host=db["HOST"], port=db["PORT"], user=db["USER"],
                            dbname=db["NAME"], autocommit=True)
    try:
        # Another pass, in another worker, holds the job's lock: this one sends nothing,
        # so a due delivery is never POSTed by two passes at once.
        other.execute("SELECT pg_advisory_lock(%s)", [lock_key(webhooks.JOB)])
        report = webhooks.publish()
        assert (report.locked_out, report.queued, report.delivered) == (True, 0, 0)
        assert not WebhookDelivery.objects.exists() and receiver.requests == []
        other.execute("SELECT pg_advisory_unlock(%s)", [lock_key(webhooks.JOB)])
        report = webhooks.publish()
        assert (report.locked_out, report.queued, report.delivered) == (False, 1, 1)
        # The pass let go of the lock when it ended.
        assert other.execute("SELECT pg_try_advisory_lock(%s)",
                             [lock_key(webhooks.JOB)]).fetchone()[0]
    finally:
        other.close()


def test_a_subscriber_registered_in_the_admin_is_told_only_what_happens_next(
        receiver, script, admin_client):
    before = new_run()
    executor.advance_run(before.pk, worker="w1")
    # An outcome written before outcomes were read from the audit chain: an event row as
    # well as its record. A subscriber reading from the start would be told it twice.
    RunEvent.objects.create(run=before, status_from="running", status_to="running",
                            step_name="fetch", outcome="succeeded", created_at=timezone.now())
    response = admin_client.post("/admin/api/webhooksubscriber/add/", {
        "name": "crm", "url": receiver.url, "secret": "whsec-crm-4711-0815", "workflows": "[]",
        "active": "on"})
    assert response.status_code == 302, response.content[:500]
    webhooks.publish()
    assert receiver.requests == []  # nothing from before its registration
    after = new_run()
    executor.advance_run(after.pk, worker="w1")
    webhooks.publish()
    told = [json.loads(body) for _, body in receiver.requests]
    assert told and {t["run"]["id"] for t in told} == {after.pk}
    outcomes = [t["step"]["name"] for t in told if t["type"] == "run.step_completed"]
    assert len(outcomes) == len(set(outcomes)) == 4
