"""What the model writes is masked where people see it (a credential, a declared sensitive
value such as the vendor's IBAN it was told), and kept sealed for the model alone: its next
turns are sent its own words. A summary is where the facts of the turns it covers are kept
for the model; an IBAN erased there came back as a payment to "[redacted]", which an
approver could not tell from a sealed field's mask. And a call whose argument is the mask
itself is never made: the model is told why."""

import json
import re

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from demo.sandbox.models import LedgerEntry
from runs.agent_models import AgentTurn, ToolCall
from runs.agents import agent_history, agent_loop
from runs.machine import sensitive
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus
from tests.agent_runs import advance, start_summarised, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "s3cr3t-value-42"


def call(call_id: str, tool: str, **arguments) -> dict:
    return {"id": call_id, "name": tool, "arguments": json.dumps(arguments)}


def test_the_model_is_sent_its_own_words_where_people_see_them_masked(live_sandbox,
                                                                     monkeypatch, client):
    seen = scripted(monkeypatch,
                    ModelTurn(content=f"Reading it; the portal's token: {SECRET}",
                              tool_calls=[call("a", "read-invoice", number="INV-2001")]),
                    ModelTurn(content="Done.", tool_calls=[]))
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message

    # The second turn was sent the first as the model wrote it.
    said = [m["content"] for m in seen[1] if m["role"] == "assistant"]
    assert said == [f"Reading it; the portal's token: {SECRET}"]
    first = AgentTurn.objects.get(step__run=run, index=0)
    assert SECRET not in first.content and "token: [redacted]" in first.content
    assert first.sealed_content and SECRET not in first.sealed_content
    # A turn with nothing masked keeps no sealed copy.
    assert AgentTurn.objects.get(step__run=run, index=1).sealed_content == ""
    # Admin shows the turn as people see it, not its sealed copy.
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(reverse("admin:runs_agentturn_change", args=[first.pk])).content.decode()
    assert "token: [redacted]" in page and sensitive.PREFIX not in page


def summarising_model(monkeypatch) -> None:
    """The summarised triage agent's model, scripted: it reads the invoice and looks its
    vendor up, then reads on until its conversation is summarised (the summary names the
    vendor's IBAN it was told), then posts to the ledger with the IBAN it reads in the
    summary it is sent, and answers."""
    told: dict = {}

    def ask_model(client, spec, conversation, tools=True):
        for message in conversation:
            if message["role"] == "tool" and '"vendor"' in message["content"]:
                told["invoice"] = json.loads(message["content"])
            if message["role"] == "tool" and '"iban"' in message["content"]:
                told["vendor"] = json.loads(message["content"])
        if not tools:
            return ModelTurn(content=f"Invoice INV-2001 read; its vendor has IBAN "
                                     f"{told['vendor']['iban']} ; nothing posted yet.",
                             tool_calls=[])
        if "invoice" not in told:
            return ModelTurn(content="", tool_calls=[call("a", "read-invoice",
                                                          number="INV-2001")])
        if "vendor" not in told:
            return ModelTurn(content="", tool_calls=[call(
                "b", "lookup-vendor", name=told["invoice"]["vendor"])])
        summary = next((m["content"] for m in conversation if m["role"] == "user" and
                        m["content"].startswith("Summary of")), None)
        if summary is None:
            return ModelTurn(content="", tool_calls=[call(
                f"r{len(conversation)}", "read-invoice", number="INV-2001")])
        if any(m["role"] == "tool" and "LE-" in m["content"] for m in conversation):
            return ModelTurn(content="Posted.", tool_calls=[])
        return ModelTurn(content="", tool_calls=[call(
            "d", "post-ledger", invoice="INV-2001", account="expenses:office",
            amount="345.48", currency="EUR",
            iban=re.search(r"IBAN (\S+) ;", summary).group(1))])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)


def test_an_iban_in_a_summary_is_sent_to_the_model_and_the_posting_is_made_with_it(
        live_sandbox, monkeypatch, settings):
    settings.EXTERNAL_TIMEOUT_SECONDS = 15
    summarising_model(monkeypatch)
    run = advance(start_summarised("tenant-42:iban-in-summary"), times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message

    iban = sensitive.opened(ToolCall.objects.get(step__run=run, tool="lookup-vendor")
                            .result)["iban"]
    posting = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert posting.status == "succeeded"
    assert iban.startswith("DE") and sensitive.opened(posting.arguments)["iban"] == iban
    assert LedgerEntry.objects.count() == 1
    # People see the summary masked; the model was sent it as written.
    summary = AgentTurn.objects.get(step__run=run, summarises__gt=0)
    assert iban not in summary.content and "IBAN [redacted]" in summary.content
    assert iban in agent_history.written(summary)


def test_a_call_whose_argument_is_the_mask_is_never_made_and_the_model_is_told(
        live_sandbox, monkeypatch):
    seen = scripted(monkeypatch,
                    ModelTurn(content="", tool_calls=[call(
                        "d", "post-ledger", invoice="INV-2001", account="expenses:office",
                        amount="345.48", currency="EUR", iban="[redacted]")]),
                    ModelTurn(content="I cannot post without the account.", tool_calls=[]))
    run = advance(start_triage())

    posting = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert posting.status == "invalid" and posting.attempt == 0
    assert "iban is '[redacted]'" in posting.error_message
    assert LedgerEntry.objects.count() == 0
    told = [m["content"] for m in seen[1] if m["role"] == "tool"]
    assert len(told) == 1 and "iban is '[redacted]'" in told[0]
