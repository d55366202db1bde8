"""The next step show_run gives for a run a person ended while a tool call of its agent was
unknown says what settling the call does there: it records what the call did, the agent
does not go on, and the run is terminated once every effect is settled. Never that the
agent goes on: the reconcile does not send an ended run on, and the run stays ended."""

import io
import json

import pytest
from django.core.management import call_command

from audit.chain import Actor
from runs.machine import transitions
from runs.models import AgentTurn, Run, RunStatus, ToolCall
from runs.operator.reconciliation import reconcile_tool_call_by_key
from tests.agent_runs import posting_left_unknown

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = Actor.system("operator")


def _show_run(run: Run, *args: str) -> str:
    out = io.StringIO()
    call_command("show_run", str(run.pk), *args, stdout=out)
    return out.getvalue()


def test_the_next_step_says_settling_the_call_leaves_the_ended_run_ended(live_sandbox):
    run = posting_left_unknown()
    call = ToolCall.objects.get(step__run=run, tool="post-ledger")
    transitions.terminate(run.pk, actor=OPERATOR, reason="stop this triage",
                          approved_by=Actor.system("second"))

    next_line = next(line for line in _show_run(run).splitlines()
                     if line.startswith("  next: "))
    assert next_line.startswith(f"  next: Reconcile tool call: triage: The run was ended "
                                f"while the outcome of tool call {call.ref} (post-ledger) "
                                "of triage was unknown")
    assert "does not send the agent on" in next_line
    assert "once every effect is settled the run is terminated" in next_line
    assert "the agent goes on" not in next_line
    shown = json.loads(_show_run(run, "--json"))["next_step"]
    assert shown["action"] == "reconcile_tool_call" and shown["why"] in next_line

    # As it says: the ledger answers again, the lookup settles the call, and the run is
    # terminated; the agent was asked nothing more and made no other call.
    turns = AgentTurn.objects.filter(step__run=run).count()
    reconcile_tool_call_by_key(run.pk, step_name="triage", call_ref=call.ref,
                               actor=OPERATOR, reason="the ledger answers again")
    call.refresh_from_db()
    assert call.status == "succeeded"
    assert Run.objects.get(pk=run.pk).status == RunStatus.TERMINATED
    assert AgentTurn.objects.filter(step__run=run).count() == turns
    assert ToolCall.objects.filter(step__run=run).count() == 4
