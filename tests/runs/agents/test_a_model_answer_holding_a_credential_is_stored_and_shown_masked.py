"""A model may write a credential into its text or into a tool call's arguments (one it read
in the input, or made up). A checkpoint never holds one: the stored turn, the calls' rows,
the audit trail and the run page show it masked, as the step's result does; the call with
valid arguments still runs with what it needs."""

import json

import pytest
from django.contrib.auth.models import User

from audit.models import AuditRecord
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AgentTurn, RunStatus, Step, ToolCall
from tests.agent_runs import advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "hunter2-very-secret"


def test_a_credential_the_model_wrote_is_in_no_row_record_or_page(live_sandbox, monkeypatch,
                                                                 client):
    scripted(monkeypatch,
             ModelTurn(content=f"Logging in with password: {SECRET} and Bearer {SECRET}",
                       tool_calls=[
                           {"id": "a", "name": "read-invoice",
                            "arguments": json.dumps({"number": "INV-2001", "password": SECRET})},
                           {"id": "b", "name": "read-invoice",
                            "arguments": json.dumps({"number": "", "api_key": SECRET})}]),
             ModelTurn(content=f"Done, api_key={SECRET}", tool_calls=[]))
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    valid, invalid = ToolCall.objects.filter(step__run=run).order_by("index")
    # The valid call ran with its arguments; the invalid one never ran.
    assert valid.status == "succeeded" and valid.arguments == {"number": "INV-2001"}
    assert invalid.status == "invalid" and invalid.attempt == 0

    turns = list(AgentTurn.objects.filter(step__run=run).order_by("index"))
    assert "[redacted]" in turns[0].content and "[redacted]" in turns[1].content
    stored = json.dumps([[t.content, t.tool_calls] for t in turns]) + json.dumps(
        [c.arguments for c in (valid, invalid)])
    assert SECRET not in stored
    assert SECRET not in json.dumps(Step.objects.get(run=run, name="triage").result)
    assert SECRET not in json.dumps(list(AuditRecord.objects.filter(run=run)
                                         .values_list("data", "reason")))
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "Logging in with" in page and SECRET not in page
