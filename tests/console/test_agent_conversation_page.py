"""The run page's agent conversation: the same queries for 2 and for 40 tool calls, and the
model's content and the tool arguments (untrusted: the model wrote them) escaped."""

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from runs.machine import keys, transitions
from runs.machine.transitions.agent_calls import args_hash
from runs.models import AgentTurn, Step, ToolCall
from tests.factories import SYSTEM

pytestmark = pytest.mark.django_db(transaction=True)


def agent_run(calls: int, *, content: str = "reading the invoice", note: str = "n"):
    """An invoice-triage run whose agent step holds `calls` tool calls, one turn each (as
    if the model had asked for them): rows only, nothing is sent anywhere."""
    run, _ = transitions.start_run(
        workflow="invoice-triage", business_key=f"tenant-42:page-{calls}-{note}",
        input={"tenant": "tenant-42", "invoice_number": "INV-2001",
               "requester_email": "requester@example.com"}, actor=SYSTEM, wake=False)
    step = Step.objects.get(run=run, name="triage")
    now = timezone.now()
    AgentTurn.objects.bulk_create([
        AgentTurn(step=step, index=i, content=content, created_at=now, prompt_tokens=100 + i,
                  completion_tokens=7, tool_calls=[{"id": f"c{i}", "name": "post-ledger",
                                                    "arguments": "{}"}])
        for i in range(calls)])
    rows = []
    for i in range(calls):
        arguments = {"invoice": note, "account": "expenses:office", "amount": "12.00",
                     "currency": "EUR", "iban": "DE89370400440532013000"}
        rows.append(ToolCall(
            step=step, turn=i, index=0, call_id=f"c{i}", tool="post-ledger", kind="write",
            impact="high", arguments=arguments, args_hash=args_hash(arguments),
            status="succeeded", attempt=1, remote_ref=f"LE-{i:04d}", updated_at=now,
            idempotency_key=keys.tool_call_key(run.workflow_name, run.business_key,
                                               "triage", 1, i, 0, "post-ledger")))
    ToolCall.objects.bulk_create(rows)
    return run


def page_and_queries(client, run):
    with CaptureQueriesContext(connection) as ctx:
        body = client.get(reverse("console:run", args=[run.pk])).content.decode()
    return body, len(ctx)


def test_the_conversation_costs_the_same_queries_for_2_and_40_tool_calls(client_for,
                                                                          operator):
    client = client_for(operator)
    few, many = agent_run(2), agent_run(40)
    body, small = page_and_queries(client, few)
    assert "2 tool calls" in body and "LE-0001" in body
    body, large = page_and_queries(client, many)
    assert "40 tool calls" in body and "LE-0039" in body
    assert len(re.findall(r'class="mono">LE-\d{4}', body)) == 40
    assert large == small


def test_model_content_and_tool_arguments_are_escaped(client_for, operator):
    client = client_for(operator)
    run = agent_run(1, content="<script>alert('turn')</script>",
                    note="<script>alert('args')</script>")
    body, _ = page_and_queries(client, run)
    assert "<script>alert(" not in body
    assert "&lt;script&gt;alert(&#x27;turn&#x27;)&lt;/script&gt;" in body
    assert "&lt;script&gt;alert(&#x27;args&#x27;)" in body
    # The tool declares its iban redacted.
    assert "DE89370400440532013000" not in body and "[redacted]" in body
