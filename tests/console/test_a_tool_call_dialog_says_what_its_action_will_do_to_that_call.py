"""The dialog of an action aimed at one tool call says, besides the action's description, what
it will do to that call (runs.operator.previews.tool_call_outline, through the action's own
explain): the reconcile of a high-impact call says that a "not found" answer is told to the
model, whose repeat with the same arguments is sent under the call's key and with other
arguments under a new one; a low-impact call's reconcile names its key and warns of nothing.
The invoice-triage agent runs against the sandbox over real HTTP."""

import re

import pytest
from django.urls import reverse

from demo.sandbox import faults
from runs.models import AttentionReason, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)

WARNING = "with other arguments, under a new key"


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def unknown_call(tool: str, endpoint: str, key: str) -> ToolCall:
    """The receiver committed, then timed out; every lookup by key failed: a person's."""
    faults.add(f"{endpoint}.post" if endpoint == "ledger" else f"{endpoint}.create",
               faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add(f"{endpoint}.lookup", faults.UNAVAILABLE, times=faults.MOST_TIMES)
    run = advance(start_triage(key=f"tenant-42:{key}"))
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    call = ToolCall.objects.get(step__run=run, tool=tool)
    assert call.status == "unknown"
    return call


def reconcile_dialog(client, call: ToolCall) -> str:
    page = client.get(reverse("console:run", args=[call.step.run_id]))
    assert page.status_code == 200
    html = page.content.decode()
    slug = f"triage-{call.turn}-{call.index}"
    found = re.search(rf'<dialog id="dialog-reconcile_tool_call-{slug}".*?</dialog>', html,
                      re.DOTALL)
    assert found is not None, "no reconcile dialog on the call"
    return found.group(0)


def test_the_reconcile_dialog_of_a_high_impact_call_names_its_key_and_warns(
        client_for, operator):
    call = unknown_call("post-ledger", "ledger", "high")
    assert call.impact == "high"
    dialog = reconcile_dialog(client_for(operator), call)
    assert f"asked by the call&#x27;s idempotency key {call.idempotency_key}" in dialog
    assert "post-ledger, high impact" in dialog
    assert WARNING in dialog
    assert (f"the same arguments, the call is sent with this key {call.idempotency_key}"
            in dialog)


def test_the_reconcile_dialog_of_a_low_impact_call_names_its_key_and_warns_of_nothing(
        client_for, operator):
    call = unknown_call("open-approval-task", "tracker", "low")
    assert call.impact != "high"
    dialog = reconcile_dialog(client_for(operator), call)
    assert f"asked by the call&#x27;s idempotency key {call.idempotency_key}" in dialog
    assert "open-approval-task, low impact" in dialog
    assert WARNING not in dialog and "HIGH IMPACT" not in dialog
