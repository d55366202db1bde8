"""drill --sandbox with a URL that is no URL (a typo), or that is not the sandbox, is reported like
a sandbox that does not answer: which URL it tried and why, with a message, not a traceback,
and nothing sent there."""

import io

import pytest
from django.core.management import CommandError, call_command

from runs.models import Run
from runs.operator.sandbox_check import sandbox_answers

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("url", ["http://[::1", "http://[zz]/sandbox", "http://a:b:c/sandbox"])
def test_a_malformed_sandbox_url_is_refused_naming_it(url, settings):
    settings.SANDBOX_ENABLED = True
    with pytest.raises(CommandError, match=r"no demo sandbox answers; tried .*Invalid"):
        call_command("drill", "invoice-approval", "--sandbox", url, stdout=io.StringIO())
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["/api", "/api/"])
def test_a_server_that_is_not_the_sandbox_is_refused_before_any_drill_sends_to_it(
        path, live_server, settings):
    # The product's own API answers an unknown path with a JSON 404, as the sandbox answers
    # a key nobody used: that alone must not pass for the sandbox.
    from demo.sandbox.models import Customer, LedgerEntry

    settings.SANDBOX_ENABLED = True
    with pytest.raises(CommandError, match="not the demo's sandbox"):
        call_command("drill", "customer-onboarding", "--sandbox", live_server.url + path,
                     stdout=io.StringIO())
    assert not Run.objects.exists()
    assert not Customer.objects.exists() and not LedgerEntry.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_the_sandbox_itself_is_recognised(live_server):
    assert sandbox_answers(f"{live_server.url}/sandbox") is None


@pytest.mark.parametrize("host", ["x" * 64 + ".example", "a..example"])
def test_a_host_no_dns_name_can_be_is_refused_naming_it_invalid(host, settings):
    # httpx takes such a host; the resolver's IDNA encoding raised UnicodeError at connect.
    settings.SANDBOX_ENABLED = True
    with pytest.raises(CommandError, match=rf"tried .*invalid host '{host}'"):
        call_command("drill", "invoice-approval", "--sandbox", f"http://{host}/sandbox",
                     stdout=io.StringIO())
    assert not Run.objects.exists()


def test_a_sandbox_url_s_password_is_masked_in_the_refusal(settings, monkeypatch):
    settings.SANDBOX_ENABLED = True
    url = "http://ops:EnvSandboxPw@127.0.0.1:1/sandbox"
    monkeypatch.setenv("SANDBOX_BASE_URL", url)
    settings.SANDBOX_BASE_URL = url
    out = io.StringIO()
    with pytest.raises(CommandError, match="no demo sandbox answers") as refused:
        call_command("drill", "customer-onboarding", stdout=out, stderr=out)
    assert "EnvSandboxPw" not in str(refused.value) + out.getvalue()
    assert "http://ops:[redacted]@127.0.0.1:1/sandbox" in str(refused.value)

    with pytest.raises(CommandError) as refused:
        call_command("drill", "customer-onboarding", "--sandbox", url, stdout=out)
    assert "EnvSandboxPw" not in str(refused.value) + out.getvalue()
    assert not Run.objects.exists()
