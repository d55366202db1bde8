"""One timeline on the run page: audit records, approval emails and webhook deliveries in
time order, workers named by host and process, and an operator's own action at once."""

import uuid

import pytest
from django.urls import reverse

from console.timeline import actor_name, run_timeline
from runs import executor
from runs.models import Run
from tests.factories import new_run

pytestmark = pytest.mark.django_db


def test_workers_are_named_by_host_and_process():
    assert actor_name("box-7:4242", "system") == "worker on box-7 (process 4242)"
    assert actor_name("olga", "user") == "olga"
    assert actor_name("sweeper", "system") == "sweeper (system)"


def test_the_timeline_merges_audit_records_and_webhook_deliveries_in_time_order(script):
    from django.utils import timezone

    from api.models import WebhookDelivery, WebhookSubscriber
    from runs.models import RunEvent

    run = new_run()
    executor.advance_run(run.pk, worker="box-7:4242")
    subscriber = WebhookSubscriber.objects.create(name="crm", url="http://127.0.0.1:9/",
                                                  secret="s")
    event = RunEvent.objects.filter(run=run, step_name="create-task").get()
    WebhookDelivery.objects.create(subscriber=subscriber, event=event, delivery_id=uuid.uuid4(),
                                   status="delivered", attempts=1,
                                   next_attempt_at=timezone.now(), delivered_at=timezone.now())
    run = Run.objects.get(pk=run.pk)
    entries = run_timeline(run, list(run.audit_records.order_by("seq")))
    assert [e.at for e in entries] == sorted(e.at for e in entries)
    sources = [e.source for e in entries]
    assert sources.count("audit") == run.audit_seq and sources.count("webhook") == 1
    webhook = next(e for e in entries if e.source == "webhook")
    assert webhook.title == "progress event (create-task succeeded) delivered to crm"
    claimed = next(e for e in entries if e.title == "claimed")
    assert claimed.actor == "worker on box-7 (process 4242)"
    assert '"worker": "box-7:4242"' in claimed.data


def test_an_operators_action_appears_in_the_timeline_at_once(client_for, operator, stuck_run):
    response = client_for(operator).post(
        reverse("console:action", args=[stuck_run.pk, "retry_step"]),
        {"seen": str(stuck_run.audit_seq), "step": "create-task", "reason": "tracker fixed"},
        HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert 'id="timeline"' in body
    assert "step retried" in body and "tracker fixed" in body
