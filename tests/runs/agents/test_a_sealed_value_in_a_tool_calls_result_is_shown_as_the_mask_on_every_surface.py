"""A value a tool declares sensitive in its result is sealed at rest ("enc:<key>:<token>").
Wherever a person reads the call's result (the run page, the API's run, Django admin) it is
shown as the mask its arguments' declared fields are shown with, never as its ciphertext:
the run page showed the demo's lookup-vendor result as {"iban": "enc:dev:gAAAA..."}, and
the API's run left the result out altogether. One function (runs.machine.sensitive.shown)
says what a person sees of a call's arguments and result, on every surface."""

import html
import json

import pytest
from django.contrib.auth.models import User

from api.tokens import token_create
from audit.redaction import REDACTED
from runs.machine import sensitive
from runs.models import RunStatus, ToolCall
from tests.agent_runs import SMALL, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def looked_up(live_sandbox):
    """A triage run of the demo's agent run to its end: its lookup-vendor call returned the
    vendor's IBAN, which the tool declares sensitive (sealed in the row)."""
    run = advance(start_triage(SMALL))
    assert run.status == RunStatus.COMPLETED, run.status_message
    call = ToolCall.objects.get(step__run=run, tool="lookup-vendor")
    assert sensitive.is_sealed(call.result["iban"])
    return run, call


def test_the_run_page_shows_the_sealed_iban_of_a_result_as_the_mask(looked_up, client):
    run, call = looked_up
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert sensitive.PREFIX not in page
    assert call.result["iban"] not in page
    assert html.escape(f'"iban": "{REDACTED}"') in page
    # What is not sealed is still shown.
    assert html.escape(f'"name": "{call.result["name"]}"') in page


def test_the_api_shows_the_result_masked_as_the_run_page_does(looked_up, client):
    run, call = looked_up
    _, plaintext = token_create(name="reader", workflows=["invoice-triage"], rate_limit=None)
    response = client.get(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {plaintext}")
    assert response.status_code == 200, response.content
    assert sensitive.PREFIX not in response.content.decode()
    calls = {c["tool"]: c for c in response.json()["agent_steps"][0]["tool_calls"]}
    assert calls["lookup-vendor"]["result"] == {**call.result, "iban": REDACTED}
    # The arguments the ledger posting was sent with: its declared iban masked alike.
    assert calls["post-ledger"]["arguments"]["iban"] == REDACTED
    assert calls["post-ledger"]["result"] is not None


def test_django_admin_shows_the_result_masked_as_the_run_page_does(looked_up, client):
    _, call = looked_up
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/admin/runs/toolcall/{call.pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    assert sensitive.PREFIX not in text and call.result["iban"] not in text
    assert html.escape(f'"iban": "{REDACTED}"') in text
    assert html.escape(call.result["name"]) in text


def test_a_sealed_value_at_any_depth_is_shown_as_the_mask():
    tool = type("Tool", (), {"redact": ("iban",), "sensitive": ("account",)})()
    stored = sensitive.seal_result(
        {"iban": "DE89370400440532013000", "payees": [{"account": "DE02", "name": "A"}],
         "note": "kept"}, tool)
    shown = sensitive.shown(tool, stored)
    assert shown == {"iban": REDACTED, "payees": [{"account": REDACTED, "name": "A"}],
                     "note": "kept"}
    assert sensitive.PREFIX not in json.dumps(shown)
