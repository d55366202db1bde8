"""A publisher SIGKILLed while a receiver holds a delivery (sent, its answer not yet back)
loses nothing and blocks nothing: the delivery stays pending with no attempt counted, the
pass's lock dies with the process, and the next pass sends it again under the same
delivery id (so the receiver can drop the copy), then the rest, in order. Real processes:
the publisher is `manage.py shell` against the test database; the receiver a real HTTP
server."""

import json
import subprocess
import sys
import threading

import pytest

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from tests.factories import new_run
from tests.processes import ROOT, child_env, kill_hard, wait_for
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db(transaction=True)
RUNS = 3


def test_the_next_pass_sends_it_again_with_the_same_id():
    release = threading.Event()
    held = []

    def answer(headers, body):
        if not held:
            held.append(True)
            release.wait(60)  # the publisher dies while this delivery waits for its answer
        return 204

    receiver = WebhookReceiver(answer)
    publisher = None
    try:
        subscriber = WebhookSubscriber.objects.create(
            name="crm", url=receiver.url, secret="k", **webhook_cursors.cursors_at_head())
        runs = [new_run() for _ in range(RUNS)]
        publisher = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "shell", "-c",
             "from api import webhooks; webhooks.publish()"],
            cwd=ROOT, env=child_env(WEBHOOK_TIMEOUT_SECONDS=60), start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: receiver.requests, timeout=60, what="the first delivery")
        kill_hard(publisher)
        release.set()

        deliveries = WebhookDelivery.objects.filter(subscriber=subscriber).order_by("pk")
        assert [(d.status, d.attempts) for d in deliveries] == [("pending", 0)] * RUNS
        first_id = receiver.requests[0][0]["X-Webhook-Id"]

        report = webhooks.publish()

        assert not report.locked_out
        assert report.delivered == RUNS
        ids = [headers["X-Webhook-Id"] for headers, _ in receiver.requests]
        assert ids[0] == ids[1] == first_id
        assert len(ids) == RUNS + 1
        told = [json.loads(body)["run"]["id"] for _, body in receiver.requests[1:]]
        assert told == [run.pk for run in runs]
        assert set(deliveries.values_list("status", "attempts")) == {("delivered", 1)}
    finally:
        release.set()
        if publisher is not None and publisher.poll() is None:
            kill_hard(publisher)
        receiver.close()
