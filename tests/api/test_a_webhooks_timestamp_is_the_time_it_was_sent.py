"""X-Webhook-Timestamp is when the delivery was sent, not when the publisher's pass began.
A pass waits up to WEBHOOK_TIMEOUT_SECONDS on each of its deliveries, so a long one sends
its last deliveries minutes after it began: stamped with its start, they would be refused by
a receiver that refuses old timestamps, as the runbook tells receivers to, on every attempt
until given up. Here the pass's start is set ten minutes back; the receiver is a real HTTP
server verifying as docs/operations.md says."""

import hashlib
import hmac
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from api import webhook_cursors, webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from tests.factories import new_run
from tests.webhook_receiver import WebhookReceiver

pytestmark = pytest.mark.django_db
SECRET = "whsec-receiver"
# How old a timestamp the receiver accepts (the product's own signed inbound webhooks
# accept 300 s).
TOLERANCE = 300


class VerifyingReceiver(WebhookReceiver):
    """Answers 204 to a delivery whose signature and timestamp pass, 401 to any other."""

    def __init__(self):
        self.accepted, self.refused = [], []
        super().__init__(self._verdict)

    def _verdict(self, headers, body) -> int:
        stamp = headers["X-Webhook-Timestamp"]
        expected = "sha256=" + hmac.new(SECRET.encode(), stamp.encode() + b"." + body,
                                        hashlib.sha256).hexdigest()
        fresh = abs(time.time() - int(stamp)) <= TOLERANCE
        good = hmac.compare_digest(headers["X-Webhook-Signature"], expected)
        (self.accepted if good and fresh else self.refused).append(int(stamp))
        return 204 if good and fresh else 401


@pytest.fixture
def receiver():
    r = VerifyingReceiver()
    yield r
    r.close()


def test_a_delivery_sent_late_in_a_long_pass_is_stamped_when_sent(receiver):
    WebhookSubscriber.objects.create(name="crm", url=receiver.url, secret=SECRET,
                                     **webhook_cursors.cursors_at_head())
    new_run()
    began = timezone.now() - timedelta(minutes=10)
    webhook_cursors.queue_deliveries(now=began)
    before = int(time.time())

    report = webhooks.send_due(now=began)

    after = int(time.time())
    assert receiver.refused == []
    assert len(receiver.accepted) == 1 and before <= receiver.accepted[0] <= after
    assert (report.delivered, report.failed) == (1, 0)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("delivered", 1, "")
