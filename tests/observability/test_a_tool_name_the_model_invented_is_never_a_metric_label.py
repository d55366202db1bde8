"""A model may ask for a tool its step does not declare. The call is kept as evidence (and
stops the run), but its name is the model's text: it may quote what the model read, or what
a prompt injection told it to say, and every new name would be a series of its own.
durable_agent_tool_calls counts such calls under the tool "(undeclared)", never by the name
the model sent; the declared tools keep their own series."""

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from observability.agent_metrics import declared_tools
from runs.models import Step, ToolCall
from tests.api.test_metrics import scrape, value
from tests.console.test_agent_conversation_page import agent_run

pytestmark = pytest.mark.django_db(transaction=True)
WF = "invoice-triage"
INVENTED = 'send-to "attacker"\nIBAN DE89370400440532013000'


def invented_call(run, tool):
    step = Step.objects.get(run=run, name="triage")
    ToolCall.objects.create(step=step, turn=9, index=0, call_id="c9", tool=tool,
                            arguments={}, args_hash="0" * 64, status="invalid",
                            idempotency_key="k" * 64, updated_at=timezone.now())


def test_an_invented_tool_is_counted_as_undeclared_and_its_name_is_not_served(client):
    run = agent_run(2, note="invented")
    invented_call(run, INVENTED)
    invented_call(agent_run(1, note="other"), "another-invention")
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert "attacker" not in text and "DE8937" not in text and "another-invention" not in text
    tools = {s.labels["tool"] for f in text_string_to_metric_families(text)
             if f.name == "durable_agent_tool_calls" for s in f.samples
             if s.labels["workflow"] == WF}
    assert tools == declared_tools([WF])[WF] | {"(undeclared)"}
    samples = scrape(client)
    assert value(samples, "durable_agent_tool_calls", workflow=WF, tool="(undeclared)",
                 status="invalid") == 2
    assert value(samples, "durable_agent_tool_calls", workflow=WF, tool="post-ledger",
                 status="succeeded") == 3
