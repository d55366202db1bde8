"""Cancel tool call on a run in attention cancels the call and leaves the run in attention
(a person still has to act on what stopped it); its dialog says so, where it said the run
goes on. A run that waited only for the call goes on (test_cancel_one_tool_call.py)."""

import pytest

from audit.models import AuditRecord
from runs.machine import transitions
from runs.models import Run, RunStatus, ToolCall
from runs.operator.actions import ACTIONS, ActionInput
from tests.agent_runs import ACTOR, LARGE, advance, start_triage
from tests.factories import place

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_a_run_in_attention_stays_there_and_the_dialog_says_so():
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    run = place(run, status=RunStatus.ATTENTION)

    ACTIONS["cancel_tool_call"].perform(
        run.pk, actor=ACTOR, given=ActionInput(reason="wrong cost centre", step="triage",
                                               call=call.ref))
    assert ToolCall.objects.get(pk=call.pk).status == "cancelled"
    assert Run.objects.get(pk=run.pk).status == RunStatus.ATTENTION
    assert AuditRecord.objects.filter(run=run, action="tool_call_cancelled").count() == 1
    summary = ACTIONS["cancel_tool_call"].summary
    assert "the run goes on and" not in summary
    assert "one in attention stays with you" in summary
