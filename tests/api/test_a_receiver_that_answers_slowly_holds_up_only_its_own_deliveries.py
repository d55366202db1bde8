"""A receiver that answers every delivery, but slowly (a gateway answering 503 or 504 just
within the deadline, an overloaded service answering 204 after seconds), holds up only its
own deliveries: once its exchanges in a pass have taken WEBHOOK_TIMEOUT_SECONDS, the rest of
its deliveries wait for a later pass, not tried and their attempts untouched, while the
other subscribers' deliveries go out. The pass sent them all, each waiting out its answer,
so one such receiver with a backlog held every other subscriber for minutes. Every receiver
here is a real HTTP server on localhost."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from api import webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from tests.factories import new_run
from tests.receiver import ScriptedReceiver
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db
DEADLINE = 1.0
ANSWER_AFTER = 0.4
RUNS = 10


def slow_answers(status: int, delay: float) -> WebhookReceiver:
    """A receiver answering `status` to each POST, `delay` seconds after reading it."""
    return WebhookReceiver(answer=lambda headers, body: time.sleep(delay) or status)


@pytest.fixture(autouse=True)
def _short_deadline(settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = DEADLINE


@pytest.fixture
def good():
    with ScriptedReceiver() as receiver:
        yield receiver


@pytest.mark.parametrize("status", [503, 204])
def test_the_other_subscribers_deliveries_go_out_without_waiting_for_it(good, status):
    slow = slow_answers(status, ANSWER_AFTER)
    try:
        # Registered first: its deliveries come first in every pass.
        laggard = WebhookSubscriber.objects.create(name="laggard", url=slow.url, secret="k")
        crm = WebhookSubscriber.objects.create(name="crm", url=f"{good.url}/hooks", secret="k")
        for _ in range(RUNS):
            new_run()
        now = timezone.now()

        report = webhooks.publish(now=now)

        # Its exchanges stop once they have taken the deadline together: two or three
        # (on a busy host), not ten.
        tried = len(slow.requests)
        assert 1 <= tried <= 3, tried
        assert len(good.sent("POST", "/hooks")) == RUNS
        assert WebhookDelivery.objects.filter(subscriber=crm, status="delivered").count() == RUNS
        untried = WebhookDelivery.objects.filter(subscriber=laggard, attempts=0)
        assert untried.count() == RUNS - tried
        assert set(untried.values_list("status", "last_error")) == {("pending", "")}
        assert report.deferred == RUNS - tried

        # They go out in later passes, a few a pass, none lost.
        for _ in range(RUNS):
            webhooks.send_due(now=timezone.now() + timedelta(hours=1))
            if not untried.exists():
                break
        assert not untried.exists()
        assert not WebhookDelivery.objects.filter(subscriber=laggard,
                                                  status="failed").exists()
    finally:
        slow.close()
