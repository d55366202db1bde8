"""How many tokens an agent's turns used is a number for people to read, not a credential:
the step's result and each turn's audit record keep it (a key named "tokens" would be
masked by the redaction filter every result and record passes)."""

import pytest

from audit.models import AuditRecord
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import RunStatus, Step
from tests.agent_runs import advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_token_counts_are_readable_in_the_result_and_the_audit_trail(live_sandbox,
                                                                        monkeypatch):
    scripted(monkeypatch,
             ModelTurn(content="", tool_calls=[{"id": "a", "name": "read-invoice",
                                                "arguments": '{"number": "INV-2001"}'}],
                       prompt_tokens=100, completion_tokens=20),
             ModelTurn(content="Read it.", tool_calls=[], prompt_tokens=150,
                       completion_tokens=5))
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    result = Step.objects.get(run=run, name="triage").result
    assert result["usage"] == {"prompt": 250, "completion": 25}
    assert "[redacted]" not in str(result)
    records = AuditRecord.objects.filter(run=run, action="agent_turn_stored").order_by("seq")
    assert [r.data["usage"] for r in records] == [{"prompt": 100, "completion": 20},
                                                  {"prompt": 150, "completion": 5}]
    assert all("[redacted]" not in str(r.data) for r in records)
