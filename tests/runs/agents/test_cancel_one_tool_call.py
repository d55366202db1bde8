"""A person cancels one tool call (pending or waiting for approval) without cancelling the
run: the call never runs, the model is told in its next turn that a person cancelled it, and
the call's approval request is withdrawn."""

import json

import pytest

from approvals import requests, schedule
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry
from runs.agents import agent_loop
from runs.machine import transitions
from runs.machine.errors import TransitionNotAllowed
from runs.models import ApprovalWait, Run, RunStatus, Step, ToolCall
from runs.operator.actions import ACTIONS, ActionInput, offered
from tests.agent_runs import ACTOR, LARGE, SMALL, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_cancelling_a_call_that_waits_for_approval_lets_the_agent_go_on_without_it(
        monkeypatch):
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    assert call.tool == "post-ledger"
    requests.open_pending_requests()
    request = ApprovalRequest.objects.get(tool_call_id=call.pk)
    assert request.status == "pending"
    steps = list(Step.objects.filter(run=run))
    assert "cancel_tool_call" in {a.name for a in offered(run, steps)}

    ACTIONS["cancel_tool_call"].perform(
        run.pk, actor=ACTOR, given=ActionInput(reason="wrong cost centre", step="triage",
                                               call=call.ref))
    call.refresh_from_db()
    assert call.status == "cancelled" and call.attempt == 0
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.QUEUED and not ApprovalWait.objects.filter(run=run).exists()
    record = AuditRecord.objects.get(run=run, action="tool_call_cancelled")
    assert record.reason == "wrong cost centre" and record.data["tool_call"] == call.ref
    assert schedule.withdraw_stale_requests() == 1
    request.refresh_from_db()
    assert request.status == "withdrawn"

    conversations = []
    ask = agent_loop.ask_model

    def seen(client, spec, conversation):
        conversations.append(conversation)
        return ask(client, spec, conversation)

    monkeypatch.setattr(agent_loop, "ask_model", seen)
    advance(run)
    told = [m for m in conversations[0] if m.get("role") == "tool"
            and m.get("tool_call_id") == call.call_id]
    assert len(told) == 1 and "a person cancelled this call" in json.loads(
        told[0]["content"])["error"]
    # The cancelled posting never reached the ledger.
    assert not LedgerEntry.objects.filter(transaction_ref=call.idempotency_key).exists()
    assert ToolCall.objects.get(pk=call.pk).status == "cancelled"


def test_a_call_that_ran_is_not_cancelled():
    run = advance(start_triage(SMALL))
    assert run.status == RunStatus.COMPLETED
    done = ToolCall.objects.filter(step__run=run).first()
    with pytest.raises(TransitionNotAllowed):
        transitions.cancel_tool_call(run.pk, step_name="triage", call_ref=done.ref,
                                     actor=ACTOR, reason="too late")
    assert ToolCall.objects.get(pk=done.pk).status == "succeeded"


def test_cancelled_through_the_one_action_function_its_request_is_withdrawn_at_once():
    """From the console, the API or the command line (approvals.operator_actions.act): the
    request is withdrawn in the same breath, not at the sweep's next pass, so the model's
    next proposal never supersedes it under the wrong reason."""
    from django.contrib.auth.models import User

    from approvals.operator_actions import act

    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    requests.open_pending_requests()
    request = ApprovalRequest.objects.get(tool_call_id=call.pk)
    outcome = act("cancel_tool_call", run.pk, user=User.objects.create_superuser("root"),
                  given=ActionInput(reason="wrong cost centre", step="triage",
                                    call=call.ref))
    assert outcome.done
    request.refresh_from_db()
    assert request.status == "withdrawn" and request.superseded_by_id is None
    assert f"tool call {call.ref} cancelled" in request.comment
    assert AuditRecord.objects.filter(run=run, action="approval_withdrawn").count() == 1
    # The agent goes on; whatever it proposes next is a request of its own.
    advance(run)
    requests.open_pending_requests()
    request.refresh_from_db()
    assert request.status == "withdrawn" and request.superseded_by_id is None
    assert schedule.withdraw_stale_requests() == 0
