"""GET /api/runs/{id} summarises each agent step's conversation: turns, prompt and completion
tokens, and each tool call (ref, tool, state, key, remote reference, attempts, last error,
arguments and result masked as the run page masks them, the operator actions aimed at it
now), in the same queries for 2 and for 40 calls."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.models import ToolCall
from tests.console.test_agent_conversation_page import agent_run
from tests.factories import new_run

pytestmark = pytest.mark.django_db(transaction=True)

IBAN = "DE89370400440532013000"


@pytest.fixture
def reader(client, make_token):
    _, plaintext = make_token("reader", workflows=["invoice-triage", "test-orders"])
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {plaintext}"
    return client


def _get(client, run):
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(f"/api/runs/{run.pk}")
    assert response.status_code == 200, response.content
    return response, len(ctx)


def test_an_agent_step_comes_with_its_turns_tokens_and_tool_calls(reader):
    run = agent_run(3, note="summary")
    ToolCall.objects.filter(step__run=run, turn=2).update(
        status="failed", error_class="permanent", error_message="ledger: 403 account closed",
        remote_ref="", attempt=2)
    response, _ = _get(reader, run)
    (agent,) = response.json()["agent_steps"]
    assert agent["step"] == "triage" and agent["turns"] == 3
    assert (agent["prompt_tokens"], agent["completion_tokens"]) == (303, 21)
    first, _, last = agent["tool_calls"]
    call = ToolCall.objects.get(step__run=run, turn=0)
    assert first == {
        "ref": "0.0", "tool": "post-ledger", "state": "succeeded",
        "idempotency_key": call.idempotency_key, "remote_ref": "LE-0000", "attempts": 1,
        "last_error": None,
        "arguments": {"invoice": "summary", "account": "expenses:office", "amount": "12.00",
                      "currency": "EUR", "iban": "[redacted]"},
        "result": None, "actions": [], "wait_ended": None}
    assert last["state"] == "failed" and last["attempts"] == 2
    assert last["last_error"] == {"error_class": "permanent",
                                  "message": "ledger: 403 account closed"}


def test_a_field_the_tool_declares_redacted_never_appears_in_the_json(reader):
    run = agent_run(2, note="secret")
    response, _ = _get(reader, run)
    assert IBAN not in response.content.decode()
    assert IBAN not in json.dumps(response.json())
    assert all(c["arguments"]["iban"] == "[redacted]"
               for c in response.json()["agent_steps"][0]["tool_calls"])
    # The row keeps the real arguments: the API masks them, it does not lose them.
    assert ToolCall.objects.filter(step__run=run, arguments__iban=IBAN).count() == 2


def test_calls_of_a_tool_no_longer_declared_show_no_arguments(reader):
    run = agent_run(1, note="gone")
    ToolCall.objects.filter(step__run=run).update(tool="retired-tool")
    response, _ = _get(reader, run)
    (call,) = response.json()["agent_steps"][0]["tool_calls"]
    assert call["tool"] == "retired-tool" and call["arguments"] == "[redacted]"
    assert IBAN not in response.content.decode()


def test_the_same_queries_for_2_and_for_40_tool_calls(reader):
    few, many = agent_run(2, note="few"), agent_run(40, note="many")
    _get(reader, few)  # the token's first use of the minute writes its last_used_at
    response, small = _get(reader, few)
    assert len(response.json()["agent_steps"][0]["tool_calls"]) == 2
    response, large = _get(reader, many)
    assert len(response.json()["agent_steps"][0]["tool_calls"]) == 40
    assert large == small


def test_a_workflow_without_agent_steps_has_none_and_reads_no_conversation(reader):
    run = new_run()
    with CaptureQueriesContext(connection) as ctx:
        body = reader.get(f"/api/runs/{run.pk}").json()
    assert body["agent_steps"] == []
    assert not [q for q in ctx.captured_queries
                if "runs_agentturn" in q["sql"] or "runs_toolcall" in q["sql"]]


def test_the_openapi_document_describes_the_agent_summary(client):
    document = client.get("/api/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert "agent_steps" in schemas["RunState"]["required"]
    assert schemas["RunState"]["properties"]["agent_steps"]["items"] == {
        "$ref": "#/components/schemas/AgentStep"}
    call = schemas["AgentToolCall"]["properties"]
    assert {"ref", "tool", "state", "idempotency_key", "remote_ref", "attempts",
            "last_error", "arguments"} <= set(call)
    assert "unknown" in call["state"]["enum"]
