"""An agent's tool call that waits for approval and whose request cannot be made (a release
removed its tool from the agent) is held for a person like an approval step's: the run waits
in attention, saying which call and why, with no request, no email and nothing posted. So
is a call whose arguments a release's narrower schema no longer accepts: never sent, never
looked up with arguments it cannot build.
Resumed while the tool is still missing, the agent does not spin on the call: the run
waits for a person again, naming the tool. Resumed once the tool is back, the call is
asked for. The agent runs against the sandbox over real HTTP."""

import pytest
from pydantic import Field

from approvals import requests
from approvals.models import ApprovalRequest, Notification
from audit.models import AuditRecord
from demo.agent_workflow import PostLedgerArgs
from demo.sandbox.models import LedgerEntry
from runs.definitions.definition import registry
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import AttentionReason, RunStatus, Step, StepStatus, ToolCall, ToolCallStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.agent_runs import LARGE, advance, start_triage
from tests.factories import SYSTEM, step

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_a_tool_call_whose_tool_a_release_removed_holds_the_run_for_a_person(
        approvers, t0, monkeypatch):
    """The same rule reaches an agent's tool call: the call waits for approval, a release
    removes its tool from the agent, and nobody could be asked. The run waits for a person,
    the call still waiting and nothing posted; fixed and resumed, the call is asked for."""
    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING, run.status_message
    (call,) = transitions.waiting_tool_calls(run)
    agent = registry.get("invoice-triage", run.workflow_version).step(call.step.name)
    monkeypatch.delitem(agent.tools, call.tool)
    assert requests.open_pending_requests(now=t0) == 0

    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.APPROVAL_UNASKABLE
    assert run.status_message == (f"triage tool call {call.ref}: no approval request can be "
                                  f"made: triage declares no tool 'post-ledger'")
    call.refresh_from_db()
    assert call.status == ToolCallStatus.WAITING and step(run, "triage").status == "waiting"
    assert not ApprovalRequest.objects.exists() and not Notification.objects.exists()
    held = AuditRecord.objects.get(run=run, action="approval_unaskable")
    assert held.step_name == "triage" and held.data["tool_call"] == call.ref
    assert requests.open_pending_requests(now=t0) == 0
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1

    # Resumed with the tool still missing: held again, naming it; nothing is sent.
    transitions.resume(run.pk, actor=SYSTEM, reason="tried before the fix")
    run = advance(run)
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.DEFINITION_MISSING)
    assert run.status_message == (f"triage tool call {call.ref}: invoice-triage v1 in this "
                                  f"worker declares no tool 'post-ledger'")
    call.refresh_from_db()
    assert call.status == ToolCallStatus.WAITING and call.attempt == 0
    assert step(run, "triage").status == StepStatus.PENDING
    assert not ApprovalRequest.objects.exists()

    monkeypatch.undo()
    transitions.resume(run.pk, actor=SYSTEM, reason="tool restored")
    assert advance(run).status == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    request = ApprovalRequest.objects.get()
    assert (request.tool_call_id, request.status) == (call.pk, "pending")
    assert LedgerEntry.objects.count() == 0


def approved_posting():
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                 args_hash=call.args_hash, approved=True, actor=SYSTEM)
    return run, call


class StricterPosting(PostLedgerArgs):
    cost_centre: str = Field(min_length=1)  # a release added a required field


NARROWED = ("the call's stored arguments no longer match StricterPosting: cost_centre: "
            "Field required")


def test_an_approved_call_whose_arguments_a_release_narrowed_waits_for_a_person(monkeypatch):
    """Sending it would fail at every try: the run waits for a person, naming the call and
    the field, and nothing is posted; with the schema back, the approved call is sent once."""
    run, call = approved_posting()
    tool = registry.get("invoice-triage", run.workflow_version).step("triage").tools[call.tool]
    monkeypatch.setattr(tool, "args", StricterPosting)
    run = advance(run)
    assert (run.status, run.attention_reason) == (RunStatus.ATTENTION,
                                                  AttentionReason.DEFINITION_MISSING)
    assert run.status_message == (f"triage tool call {call.ref}: invoice-triage v1 in this "
                                  f"worker: {NARROWED}")
    call.refresh_from_db()
    assert call.status == ToolCallStatus.PENDING and call.attempt == 0
    assert LedgerEntry.objects.count() == 0

    monkeypatch.undo()
    transitions.resume(run.pk, actor=SYSTEM, reason="schema restored")
    assert advance(run).status == RunStatus.COMPLETED
    assert LedgerEntry.objects.count() == 1


def test_an_unknown_call_whose_arguments_a_release_narrowed_is_not_looked_up(monkeypatch):
    """The lookup by key is asked with the arguments: neither the worker nor a person's
    lookup sends a request it cannot build; a person records the outcome by hand."""
    run, call = approved_posting()
    # As the take-back leaves a call sent by a worker that died: the step unknown with it.
    ToolCall.objects.filter(pk=call.pk).update(status=ToolCallStatus.UNKNOWN, attempt=1)
    Step.objects.filter(run=run, name="triage").update(status=StepStatus.UNKNOWN)
    tool = registry.get("invoice-triage", run.workflow_version).step("triage").tools[call.tool]
    monkeypatch.setattr(tool, "args", StricterPosting)
    run = advance(run)
    assert run.attention_reason == AttentionReason.DEFINITION_MISSING
    assert NARROWED in run.status_message
    assert Step.objects.get(run=run, name="triage").status == StepStatus.UNKNOWN
    with pytest.raises(TransitionNotAllowed, match=f"tool call {call.ref} cannot be looked "
                                                   f"up: {NARROWED}"):
        ACTIONS["reconcile_tool_call"].perform(run.pk, actor=SYSTEM, given=ActionInput(
            reason="look it up", step="triage", call=call.ref, mode="ask"))
    call.refresh_from_db()
    assert call.status == ToolCallStatus.UNKNOWN and LedgerEntry.objects.count() == 0
