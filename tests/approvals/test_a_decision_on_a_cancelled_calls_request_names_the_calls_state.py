"""A person's decision on an agent's tool call, recorded while its run was passing through
queued and left for the sweep to apply, whose call an operator then cancelled, the
withdrawal after the cancel's commit not done (approvals.operator_actions: the sweep is
left to it). The sweep's application is refused, and the request settled with why: the
call's state, told first as an operator action aimed at a call tells it
(tool_call_rules.call_state_refusal), not the run's, which was queued by that cancel and
says nothing of the call. The agent runs against the sandbox over real HTTP."""

import uuid
from datetime import timedelta

import pytest

from approvals import requests
from approvals.application import NOT_APPLIED, PENDING, apply_pending_decisions
from approvals.decisions import decide
from approvals.models import ApprovalRequest, RequestStatus
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry
from runs.machine import transitions
from runs.models import Run, RunStatus, ToolCallStatus
from tests.agent_runs import ACTOR, LARGE, advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_sweeps_refusal_names_the_cancelled_call_not_the_queued_run(
        live_sandbox, approvers, ann, t0):
    run = advance(start_triage(LARGE))
    (call,) = transitions.waiting_tool_calls(run)
    assert requests.open_pending_requests(now=t0) == 1
    request = ApprovalRequest.objects.get(run=run)
    # Held for a person meanwhile (as the sweep holds a wait nobody can be asked for), and
    # resumed: queued, the call still waiting for its approval.
    transitions.approval_unaskable(run.pk, step_name="triage", tool_call=call.ref,
                                   actor=ACTOR, why="the approvers' group was being renamed")
    transitions.resume(run.pk, actor=ACTOR, reason="group renamed")
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED

    decided = decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    assert decided.outcome == "recorded" and decided.application == PENDING, decided.message
    assert advance(run).status == RunStatus.WAITING
    transitions.cancel_tool_call(run.pk, step_name="triage", call_ref=call.ref, actor=ACTOR,
                                 reason="wrong cost centre")
    assert Run.objects.get(pk=run.pk).status == RunStatus.QUEUED

    assert apply_pending_decisions(now=t0 + timedelta(hours=1)) == 1

    request.refresh_from_db()
    assert request.status == RequestStatus.APPROVED and request.settled_at is not None
    assert request.apply_error == (
        f"not applied: tool call {call.ref} (post-ledger) of triage no longer waits for "
        "approval: a person cancelled it: it was never made (cancelled); this decision is "
        "for a request that no longer stands")
    assert decide(request.pk, user=ann, approved=True,
                  decision_id=request.decision_id).application == NOT_APPLIED
    call.refresh_from_db()
    assert call.status == ToolCallStatus.CANCELLED and call.approved_hash == ""
    assert not AuditRecord.objects.filter(run=run, action="tool_call_approval_decided").exists()
    assert LedgerEntry.objects.count() == 0
