"""A person ended an agent's run while two of its tool calls were unknown. Settling one of
them settles that call only: the other stays unknown, the agent is not sent on (no model
turn, no call made again), and the run stays in attention for the call left, saying what was
recorded and naming only that call as not settled, with the next step aimed at it. Settling
the second ends the run: terminated, every effect settled, each effect made once.

No worker path leaves two calls unknown at once (an agent stops at its first unknown call):
the ledger posting's is real (made, timed out, its lookups by key failed), the approval task's
is placed beside it, on a task the tracker really holds under the call's key."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry, Task
from runs.agent_models import AgentTurn
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, Step, StepStatus, ToolCall
from runs.operator import guidance
from runs.operator.actions import ACTIONS, ActionInput
from tests.agent_runs import posting_left_unknown

pytestmark = pytest.mark.django_db(transaction=True)
OPERATOR = Actor.system("operator")
SECOND = Actor.system("second")
NOT_SETTLED = "outcome unknown: may have happened"


def look_up(run: Run, call: ToolCall) -> Run:
    ACTIONS["reconcile_tool_call"].perform(run.pk, actor=OPERATOR, given=ActionInput(
        reason="look it up by its key", step="triage", call=call.ref, mode="ask"))
    return Run.objects.get(pk=run.pk)


def test_settling_one_of_two_unknown_calls_of_an_ended_run_leaves_the_other_unknown(
        live_sandbox):
    run = posting_left_unknown()
    task = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    posting = ToolCall.objects.get(step__run=run, tool="post-ledger")
    assert (task.status, posting.status) == ("succeeded", "unknown")
    ToolCall.objects.filter(pk=task.pk).update(status="unknown", error_class="unknown",
                                               error_message="ReadTimeout: timed out")
    # With a second person's approval: the effects in doubt may stand (four eyes).
    transitions.terminate(run.pk, actor=OPERATOR, reason="stop this triage",
                          approved_by=SECOND)
    run.refresh_from_db()
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    assert run.status_message == (
        f"ended (stop this triage); not settled yet: triage: tool call {task.ref} "
        f"open-approval-task: {NOT_SETTLED}; triage: tool call {posting.ref} post-ledger: "
        f"{NOT_SETTLED}")
    turns = AgentTurn.objects.filter(step__run=run).count()

    run = look_up(run, task)

    task.refresh_from_db()
    posting.refresh_from_db()
    assert (task.status, task.remote_ref) == ("succeeded", Task.objects.get().ref)
    assert posting.status == "unknown"
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.ENDED_UNSETTLED)
    assert run.status_message == (
        f"ended (call {task.ref} recorded as found); not settled yet: triage: tool call "
        f"{posting.ref} post-ledger: {NOT_SETTLED}")
    assert "every effect settled" not in run.status_message
    step = Step.objects.get(run=run, name="triage")
    assert (step.status, step.error_message) == (
        StepStatus.UNKNOWN, "a tool call's outcome unknown when the run was terminated")
    offered = guidance.recommend(run, list(run.steps.all()))
    assert offered.action is ACTIONS["reconcile_tool_call"]
    assert offered.call_slug == f"triage-{posting.turn}-{posting.index}"
    assert offered.unknown == [f"whether tool call {posting.ref} (post-ledger) of triage took "
                               "effect in the remote system"]
    # Not sent on: no model turn, and neither call made again.
    assert AgentTurn.objects.filter(step__run=run).count() == turns
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1
    assert AuditRecord.objects.filter(run=run, action="reconciled").count() == 1

    run = look_up(run, posting)

    posting.refresh_from_db()
    assert posting.status == "succeeded"
    assert posting.remote_ref == LedgerEntry.objects.get().ref
    assert run.status == RunStatus.TERMINATED and run.attention_reason == ""
    assert run.status_message == f"every effect settled (call {posting.ref}: found)"
    step.refresh_from_db()
    assert (step.status, step.error_message) == (
        StepStatus.FAILED, "ended by a person; its tool calls are settled")
    assert guidance.recommend(run, list(run.steps.all())) is None
    assert AgentTurn.objects.filter(step__run=run).count() == turns
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1
    assert AuditRecord.objects.filter(run=run, action="reconciled").count() == 2
    assert ToolCall.objects.filter(step__run=run, status="unknown").count() == 0
