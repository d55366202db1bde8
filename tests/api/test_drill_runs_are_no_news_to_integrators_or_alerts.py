"""A drill breaks runs on purpose. Its runs are told apart wherever real work is reported:
webhook subscribers are sent none of their changes, the metrics (and so the alerts read
from them) leave them out, and a run's state over the API says it is a drill run."""

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from api.models import WebhookDelivery, WebhookSubscriber
from api.webhook_cursors import queue_deliveries
from runs.models import AttentionReason, Run, RunStatus
from tests.factories import new_run, place

pytestmark = pytest.mark.django_db


def _in_attention(*, drill: bool) -> Run:
    return place(new_run(wake=False, drill=drill), status=RunStatus.ATTENTION,
                 attention_reason=AttentionReason.PERMANENT_ERROR)


def _samples(name: str) -> dict:
    body = Client().get("/metrics").content.decode()
    return {tuple(sorted(s.labels.items())): s.value
            for f in text_string_to_metric_families(body) for s in f.samples
            if s.name == name}


def test_the_metrics_count_real_work_alone():
    _in_attention(drill=True)
    _in_attention(drill=True)
    _in_attention(drill=False)
    runs = _samples("durable_runs")
    assert runs[(("status", "attention"), ("workflow", "test-orders"))] == 1
    attention = _samples("durable_runs_attention")
    assert sum(v for labels, v in attention.items()
               if ("workflow", "test-orders") in labels) == 1


def test_a_subscriber_is_sent_nothing_of_a_drill_run():
    subscriber = WebhookSubscriber.objects.create(name="crm", url="https://crm.example/hooks",
                                                  secret="s" * 32, workflows=[])
    drill, real = _in_attention(drill=True), _in_attention(drill=False)
    queue_deliveries(now=None)
    delivered = WebhookDelivery.objects.filter(subscriber=subscriber)
    assert delivered.exists()
    assert not delivered.filter(event__run=drill).exists()
    assert not delivered.filter(record__run=drill).exists()
    assert delivered.filter(event__run=real).exists()


def test_a_runs_state_says_it_is_a_drill_run(api_client):
    drill, real = new_run(wake=False, drill=True), new_run(wake=False)
    assert api_client.get(f"/api/runs/{drill.pk}").json()["drill"] is True
    assert api_client.get(f"/api/runs/{real.pk}").json()["drill"] is False
