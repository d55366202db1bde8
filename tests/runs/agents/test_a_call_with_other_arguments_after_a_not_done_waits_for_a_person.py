"""A person settles an unknown ledger posting as "not done"; its request may still land. The
model then asks for a posting with other arguments: another action, under a new key, which
would stand beside the first should it land. Sent unattended, the ledger could hold both.
So it waits for a person's approval, the request naming the earlier call and why (posted
below the amount that asks anyone, so nothing else would have asked): declined, nothing more
is posted and the model is told; approved, it is posted once. The repeat with the same
arguments takes the settled call's key and asks nobody, as before. The triage agent posts
to the sandbox's ledger over real HTTP; its model answers from a script."""

import json
import uuid

import pytest
from django.contrib.auth.models import Group, User

from approvals import decisions, requests
from approvals.models import ApprovalRequest
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.definitions import definition
from runs.machine import transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, RunStatus, ToolCall
from tests.agent_runs import ACTOR, advance, start_triage
from tests.runs.agents.scripted_model import scripted

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox, settings):
    settings.APPROVALS_BASE_URL = "http://testserver"
    return live_sandbox


@pytest.fixture
def approver():
    user = User.objects.create_user("ann", email="ann@example.com", password="pw")
    user.groups.add(Group.objects.get_or_create(name="approvers")[0])
    return user


def _posting(amount: str, call_id: str) -> dict:
    return {"id": call_id, "name": "post-ledger", "arguments": json.dumps({
        "invoice": "INV-2001", "account": "expenses:office", "amount": amount,
        "currency": "EUR", "iban": "DE89370400440532013000"})}


def _settled_not_done(monkeypatch, second_amount: str):
    """The model posts 345.48; the ledger commits it and times out, no lookup answers, and a
    person settles it as not done. The model's next turn posts `second_amount`, its last
    says it is done."""
    scripted(monkeypatch,
             ModelTurn(content="", tool_calls=[_posting("345.48", "p1")]),
             ModelTurn(content="", tool_calls=[_posting(second_amount, "p2")]),
             ModelTurn(content="Posted.", tool_calls=[]))
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    faults.add("ledger.lookup", faults.UNAVAILABLE, times=faults.MOST_TIMES)
    run = advance(start_triage())
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    (first,) = ToolCall.objects.filter(step__run=run, tool="post-ledger")
    transitions.reconcile_tool_call(
        run.pk, step_name="triage", call_ref=first.ref, verdict=definition.NotFound(),
        actor=ACTOR, reason="the ledger's search showed nothing yet",
        evidence="searched the ledger for the invoice at 10:02: no entry")
    assert LedgerEntry.objects.count() == 1  # it had landed
    return advance(run), first


def _asked(run) -> ApprovalRequest:
    assert requests.open_pending_requests() == 1
    return ApprovalRequest.objects.get(run=run)


def test_a_posting_with_other_arguments_waits_for_a_person_who_is_told_why(monkeypatch,
                                                                         approver):
    run, first = _settled_not_done(monkeypatch, "345.00")

    assert run.status == RunStatus.WAITING, run.status_message
    assert f"tool call {first.ref} of post-ledger was settled as not done" in run.status_message
    second = ToolCall.objects.get(step__run=run, tool="post-ledger", turn__gt=first.turn)
    assert second.status == "waiting" and second.attempt == 0
    assert second.idempotency_key != first.idempotency_key
    assert LedgerEntry.objects.count() == 1
    approval = _asked(run)
    assert approval.snapshot["may_land_beside"] == first.ref
    assert "both could stand" in approval.snapshot["why_a_person_approves"]
    assert approval.approvers == ["group:approvers"]

    outcome = decisions.decide(approval.pk, user=approver, approved=False,
                               decision_id=uuid.uuid4(), comment="the first one landed")
    assert outcome.recorded, outcome.message
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    second.refresh_from_db()
    assert second.status == "declined" and second.attempt == 0
    assert LedgerEntry.objects.count() == 1


def test_approved_it_is_posted_once_under_its_own_key(monkeypatch, approver):
    run, first = _settled_not_done(monkeypatch, "345.00")
    approval = _asked(run)

    outcome = decisions.decide(approval.pk, user=approver, approved=True,
                               decision_id=uuid.uuid4())
    assert outcome.recorded, outcome.message
    run = advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    second = ToolCall.objects.get(step__run=run, tool="post-ledger", turn__gt=first.turn)
    assert second.status == "succeeded"
    entry = LedgerEntry.objects.get(transaction_ref=second.idempotency_key)
    assert entry.amount == 345 and LedgerEntry.objects.count() == 2
    assert ApprovalRequest.objects.filter(run=run).count() == 1


def test_the_repeat_with_the_same_arguments_asks_nobody(monkeypatch):
    run, first = _settled_not_done(monkeypatch, "345.48")

    assert run.status == RunStatus.COMPLETED, run.status_message
    repeat = ToolCall.objects.get(step__run=run, tool="post-ledger", turn__gt=first.turn)
    assert repeat.idempotency_key == first.idempotency_key
    assert LedgerEntry.objects.count() == 1
    assert not ApprovalRequest.objects.exists()


def test_a_tool_with_the_stop_verdict_gives_both_reasons(monkeypatch, approver):
    """Its every attempt waits for a person anyway (no lookup by key): the request says
    that, and that the earlier call may land beside this one."""
    scripted(monkeypatch,
             ModelTurn(content="", tool_calls=[_posting("345.48", "p1")]),
             ModelTurn(content="", tool_calls=[_posting("345.00", "p2")]),
             ModelTurn(content="Posted.", tool_calls=[]))
    run, _ = transitions.start_run(
        workflow="test-triage-stop-verdict", business_key="stop:both",
        input={"tenant": "tenant-42", "invoice_number": "INV-2001",
               "requester_email": "requester@example.com", "notes": ""},
        actor=ACTOR, wake=False)
    run = advance(run)
    first = _asked(run)
    faults.add("ledger.post", faults.COMMIT_THEN_TIMEOUT, times=1)
    assert decisions.decide(first.pk, user=approver, approved=True,
                            decision_id=uuid.uuid4()).recorded
    run = advance(run)
    assert run.attention_reason == AttentionReason.UNKNOWN_OUTCOME, run.status_message
    (settled,) = ToolCall.objects.filter(step__run=run, tool="post-ledger")
    transitions.reconcile_tool_call(
        run.pk, step_name="triage", call_ref=settled.ref, verdict=definition.NotFound(),
        actor=ACTOR, reason="not in the ledger's search yet", evidence="searched at 10:02")
    run = advance(run)

    assert run.status == RunStatus.WAITING, run.status_message
    assert requests.open_pending_requests() == 1
    second = ApprovalRequest.objects.filter(run=run).order_by("pk").last()
    assert second.snapshot["may_land_beside"] == settled.ref
    why = second.snapshot["why_a_person_approves"]
    assert "no reconcile function" in why and "both could stand" in why
    assert LedgerEntry.objects.count() == 1
