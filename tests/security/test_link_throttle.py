"""One client cannot lock every approver out: invalid approval links are throttled per
client address, a valid signed link is always honoured, the client address is found as the
deployment states (TRUSTED_PROXY_COUNT), and production refuses to start without it."""

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import Group, User
from django.test import RequestFactory
from django.urls import reverse

from approvals.tokens import approval_link_token
from console.client_address import client_ip
from tests.approvals.conftest import open_request, waiting_run

PROXY = "10.9.9.9"


@pytest.fixture
def pending(db, settings):
    settings.APPROVALS_BASE_URL = "http://testserver"
    settings.AXES_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    group, _ = Group.objects.get_or_create(name="approvers")
    User.objects.create_user("ann", password="pw").groups.add(group)
    return open_request(waiting_run())


def _open(client, request, token, *, forwarded=None):
    extra = {"REMOTE_ADDR": PROXY}
    if forwarded:
        extra["HTTP_X_FORWARDED_FOR"] = forwarded
    return client.get(reverse("approvals:link", kwargs={"pk": request.pk, "token": token}),
                      **extra)


def test_a_valid_link_is_honoured_from_a_locked_out_address(client, pending, settings):
    settings.TRUSTED_PROXY_COUNT = 0  # everyone arrives from the proxy's address
    valid = approval_link_token.make_token(pending)
    for n in range(3):
        _open(client, pending, f"forged-{n}")
    assert _open(client, pending, "forged-again").status_code == 429

    opened = _open(client, pending, valid)

    assert opened.status_code == 302
    assert opened["Location"] == reverse("approvals:detail", kwargs={"pk": pending.pk})
    # The valid link added no failure and lifted nothing: the lock still holds for forgeries.
    assert AccessAttempt.objects.get(ip_address=PROXY).failures_since_start == 3
    assert _open(client, pending, "forged-later").status_code == 429


def test_behind_a_proxy_one_client_locks_only_itself_out(client, pending, settings):
    settings.TRUSTED_PROXY_COUNT = 1
    for n in range(4):
        _open(client, pending, f"forged-{n}", forwarded="203.0.113.7")
    assert _open(client, pending, "forged", forwarded="203.0.113.7").status_code == 429

    # Another client behind the same proxy is heard: its invalid link is a 400, not a 429.
    assert _open(client, pending, "typo", forwarded="198.51.100.4").status_code == 400
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {
        "203.0.113.7", "198.51.100.4"}
    # A client cannot pick its own address: what it sends is left of the proxy's entry.
    spoofed = _open(client, pending, "forged", forwarded="1.2.3.4, 203.0.113.7")
    assert spoofed.status_code == 429


@pytest.mark.parametrize("proxies, forwarded, expected", [
    (0, "1.2.3.4", PROXY),
    (1, "1.2.3.4", "1.2.3.4"),
    (1, "6.6.6.6, 1.2.3.4", "1.2.3.4"),
    (2, "6.6.6.6, 1.2.3.4, 10.0.0.2", "1.2.3.4"),
    (2, "1.2.3.4", PROXY),            # fewer entries than proxies: not believed
    (1, "not-an-address", PROXY),
])
def test_the_client_address_is_found_as_the_deployment_states(settings, proxies, forwarded,
                                                              expected):
    settings.TRUSTED_PROXY_COUNT = proxies
    request = RequestFactory().get("/", REMOTE_ADDR=PROXY, HTTP_X_FORWARDED_FOR=forwarded)
    assert client_ip(request) == expected


def _production(**env):
    base = {k: v for k, v in os.environ.items() if k != "TRUSTED_PROXY_COUNT"}
    base.update({"DJANGO_SETTINGS_MODULE": "console.production", "SECRET_KEY": "k" * 64,
                 "ARCHIVE_SIGNING_KEYS": "a1:" + "s" * 48, "AUDIT_SEAL_KEYS": "h1:" + "h" * 48,
                 "FIELD_ENCRYPTION_KEYS": "f1:" + "A" * 43 + "=",
                 "RUNS_EVENT_DIGEST_KEYS": "e1:" + "e" * 48, **env})
    code = ("import django; django.setup(); from django.conf import settings as s; "
            "print(s.TRUSTED_PROXY_COUNT, s.AXES_CLIENT_IP_CALLABLE)")
    return subprocess.run([sys.executable, "-c", code], env=base, capture_output=True,
                          text=True, timeout=60)


def test_production_requires_the_deployment_to_state_how_the_address_is_found():
    unset = _production()
    assert unset.returncode != 0
    assert "TRUSTED_PROXY_COUNT must state how the client's address is found" in unset.stderr
    assert "it is not set" in unset.stderr
    bad = _production(TRUSTED_PROXY_COUNT="yes")
    assert bad.returncode != 0 and "got 'yes'" in bad.stderr

    stated = _production(TRUSTED_PROXY_COUNT="2")
    assert stated.returncode == 0, stated.stderr
    assert stated.stdout.split() == ["2", "console.client_address.client_ip"]
