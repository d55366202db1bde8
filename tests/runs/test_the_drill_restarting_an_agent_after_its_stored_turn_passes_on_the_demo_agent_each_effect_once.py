"""Drill 5a, a restart after an agent's model turn was stored, run for real on the demo's
invoice-triage agent: the drill's worker process SIGKILLs itself once the agent's first turn
is stored, the run is taken back and recovered as the sweeper and a worker would, and the
drill's verdict is passed. No effect is duplicated: each tool call sent once, one approval
task, one ledger posting and one message to the requester, all under their keys, and the
model never asked again for a turn it had answered."""

import pytest

from audit.models import AuditRecord
from demo.agent_workflow import triage, triage_invoices
from demo.sandbox.models import LedgerEntry, Message, ModelCall, Task
from runs.models import AgentTurn, Run, RunStatus, Step, ToolCall
from runs.operator import drills

pytestmark = pytest.mark.django_db(transaction=True)
TOOLS = ["read-invoice", "lookup-vendor", "open-approval-task", "post-ledger"]


def test_drill_5a_on_the_triage_agent_passes_with_each_effect_made_once(live_sandbox):
    result = drills.drill_restart_after_turn(triage_invoices, triage)

    assert result.passed is True, result.observed
    assert result.drill == "5a restart after a model turn was stored (triage)"
    assert result.observed == ("1 turn stored before the crash, reused; 5 turns in all; "
                               "4 tool calls, each sent once; run completed")
    (run,) = Run.objects.filter(workflow_name="invoice-triage")
    assert run.drill and run.business_key.startswith("drill:agent-crash-after-turn:")
    assert run.status == RunStatus.COMPLETED
    # The killed worker's lease was taken back, once: it died holding the run.
    assert AuditRecord.objects.filter(run=run, action="lease_expired").count() == 1
    calls = list(ToolCall.objects.filter(step__run=run).order_by("turn", "index"))
    assert [(c.tool, c.status, c.attempt) for c in calls] == [
        (tool, "succeeded", 1) for tool in TOOLS]
    by_tool = {c.tool: c for c in calls}
    (task,) = Task.objects.all()
    assert task.idempotency_key == by_tool["open-approval-task"].idempotency_key
    assert by_tool["open-approval-task"].remote_ref == task.ref
    (posting,) = LedgerEntry.objects.all()
    assert posting.transaction_ref == by_tool["post-ledger"].idempotency_key
    assert by_tool["post-ledger"].remote_ref == posting.ref
    (message,) = Message.objects.all()
    assert message.client_reference == Step.objects.get(run=run,
                                                        name="tell-requester").idempotency_key
    # Five turns (four asking for a call, then the answer), five requests to the model.
    assert ModelCall.objects.count() == 5 == AgentTurn.objects.filter(step__run=run).count()
