"""A webhook subscriber's URL is an admin's to type, and the publisher keeps the answer's
status code where admins read it: pointed at a metadata service, at the metrics endpoint on
localhost or at a private host, it would make the runtime probe what only it can reach. In a
deployment (console.production) deliveries reach public addresses only, judged on the
addresses the name resolves to when the connection is opened; WEBHOOK_PRIVATE_ADDRESSES lets
private ones through, as development and these tests' own receivers need."""

import os
import subprocess
import sys

import pytest

from api import webhooks
from api.models import WebhookDelivery, WebhookSubscriber
from api.public_network import address_refusal
from tests.api.test_webhooks import Receiver
from tests.factories import new_run
from tests.test_settings import PRODUCTION_ENV

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.server.shutdown()


@pytest.fixture
def deployment(settings):
    settings.WEBHOOK_PRIVATE_ADDRESSES = False


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_subscriber_on_a_loopback_address_is_sent_nothing(receiver, deployment, host):
    url = receiver.url.replace("127.0.0.1", host)
    WebhookSubscriber.objects.create(name="internal", url=url, secret="k")
    new_run()

    report = webhooks.publish()

    assert receiver.requests == []
    assert report.delivered == 0
    for delivery in WebhookDelivery.objects.all():
        assert delivery.status == "pending" and delivery.last_status_code is None
        assert "resolves to no public address" in delivery.last_error
        assert "is a loopback address" in delivery.last_error


def test_allowed_private_addresses_are_delivered_to(receiver, settings):
    settings.WEBHOOK_PRIVATE_ADDRESSES = True
    WebhookSubscriber.objects.create(name="local", url=receiver.url, secret="k")
    new_run()
    assert webhooks.publish().delivered == 1
    assert len(receiver.requests) == 1


@pytest.mark.parametrize(("address", "kind"), [
    ("169.254.169.254", "link-local"),
    ("10.1.2.3", "private"),
    ("192.168.0.10", "private"),
    ("::1", "loopback"),
    ("::ffff:127.0.0.1", "loopback"),
    ("fe80::1%eth0", "link-local"),
    ("100.64.0.1", "non-public"),
    ("0.0.0.0", "private"),
])
def test_addresses_that_are_not_public_are_refused_naming_their_kind(address, kind):
    assert address_refusal(address) == f"{address} is a {kind} address"


@pytest.mark.parametrize("address", ["93.184.215.14", "2606:4700::6810:84e5"])
def test_public_addresses_pass(address):
    assert address_refusal(address) is None


def test_production_refuses_private_addresses_unless_asked():
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.WEBHOOK_PRIVATE_ADDRESSES)")

    def production(**env):
        result = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "console.production",
                 **PRODUCTION_ENV, "SECRET_KEY": "k" * 64, **env},
            capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return result.stdout.strip()

    env = {k: v for k, v in os.environ.items() if k != "WEBHOOK_PRIVATE_ADDRESSES"}
    assert "WEBHOOK_PRIVATE_ADDRESSES" not in env
    assert production() == "False"
    assert production(WEBHOOK_PRIVATE_ADDRESSES="1") == "True"
