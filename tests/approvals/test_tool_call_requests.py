"""An agent's tool call that waits for a person is a real approval request, like an approval
step's: opened by the approvals sweep with its approvers' permissions and emails, decided on
the approver's page through approvals.decisions, applied by runs' decide_tool_call with the
hash of the arguments the request showed. The invoice-triage agent runs against the sandbox
over real HTTP; each test counts the ledger entries the sandbox holds afterwards."""

import uuid
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals import decisions, requests, schedule
from approvals.models import ApprovalRequest, Notification
from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import SecondPersonRequired
from runs.models import Run, RunStatus, ToolCall
from tests.agent_runs import LARGE, start_triage
from tests.approvals.run_lock_order import while_a_decision_holds_the_run

pytestmark = pytest.mark.django_db(transaction=True)

CHANGE_ARGS = "[sandbox-script: invoice-triage change-args]"


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def _advance(run, times=10):
    for _ in range(times):
        executor.advance_run(run.pk, worker="w1")
        run.refresh_from_db()
        if run.status != RunStatus.QUEUED:
            break
    return run


def _waiting_call(run) -> ToolCall:
    run = _advance(run)
    assert run.status == RunStatus.WAITING, run.status_message
    (call,) = transitions.waiting_tool_calls(run)
    return call


def _link(message) -> str:
    return next(line for line in message.body.splitlines()
                if line.startswith("http://testserver/"))[len("http://testserver"):]


def _decide(client, request, decision, comment=""):
    return client.post(reverse("approvals:decide", args=[request.pk]),
                       {"decision": decision, "comment": comment,
                        "decision_id": str(uuid.uuid4())})


def test_a_waiting_tool_call_opens_exactly_one_request_and_one_email_with_a_working_link(
        ann, client, mailoutbox):
    run = start_triage(LARGE)
    call = _waiting_call(run)
    schedule.sweep()
    schedule.sweep()  # a second pass opens nothing more and sends nothing more
    request = ApprovalRequest.objects.get(run=run)
    assert (request.kind, request.step_name, request.tool_call_id) == \
        ("tool_call", "triage", call.pk)
    assert request.params == {"tool_call": call.ref, "tool": "post-ledger",
                              "args_hash": call.args_hash}
    assert request.status == "pending" and request.approvers == ["group:approvers"]
    # The approver sees the arguments, the declared secret masked, and their hash.
    arguments = request.snapshot["arguments"]
    assert arguments["amount"] == call.arguments["amount"]
    assert arguments["iban"] == "[redacted]" and call.arguments["iban"] != "[redacted]"
    assert request.snapshot["arguments_sha256"] == call.args_hash
    assert Notification.objects.count() == 1 and len(mailoutbox) == 1
    (message,) = mailoutbox
    assert message.to == ["ann@example.com"] and "post-ledger" in message.subject
    assert call.arguments["iban"] not in message.body and "[redacted]" in message.body
    opened = AuditRecord.objects.get(run=run, action="approval_opened")
    assert opened.data["tool_call"] == call.ref and opened.data["approval_request"] == request.pk

    client.force_login(ann)
    response = client.get(_link(message))
    assert response.status_code == 302
    assert response.url == reverse("approvals:detail", args=[request.pk])
    page = client.get(response.url).content.decode()
    assert "post-ledger" in page and "Argument amount" in page
    assert call.arguments["amount"] in page and call.arguments["iban"] not in page
    assert "runs once, with exactly these arguments" in page  # what follows approval
    assert "the model is told it was declined" in page         # ...and rejection
    assert "tell-requester" in page                            # and the steps after


def test_the_approver_approves_through_the_page_and_the_call_runs_once(ann, client):
    run = start_triage(LARGE)
    call = _waiting_call(run)
    schedule.sweep()
    request = ApprovalRequest.objects.get(run=run)
    client.force_login(ann)
    decision_id = str(uuid.uuid4())
    form = {"decision": "approve", "comment": "checked", "decision_id": decision_id}
    assert client.post(reverse("approvals:decide", args=[request.pk]), form).status_code == 302
    request.refresh_from_db()
    assert request.status == "approved" and request.settled_at and not request.apply_error
    call.refresh_from_db()
    assert call.status == "pending" and call.approved_hash == call.args_hash
    assert call.approved_by == "ann"
    decided = AuditRecord.objects.get(run=run, action="tool_call_approval_decided")
    assert decided.data["approval_request"] == request.pk and decided.actor_label == "ann"
    # The same form again changes nothing.
    client.post(reverse("approvals:decide", args=[request.pk]), form)
    run = _advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.filter(transaction_ref=call.idempotency_key).count() == 1
    assert LedgerEntry.objects.count() == 1
    schedule.sweep()  # nothing is left to withdraw or ask
    assert ApprovalRequest.objects.get().status == "approved"


def test_a_rejection_on_the_page_is_returned_to_the_model_and_nothing_is_posted(ann, client):
    run = start_triage(LARGE)
    call = _waiting_call(run)
    schedule.sweep()
    request = ApprovalRequest.objects.get(run=run)
    client.force_login(ann)
    _decide(client, request, "reject", "vendor not verified")
    call.refresh_from_db()
    assert call.status == "declined" and "vendor not verified" in call.error_message
    run = _advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.count() == 0
    answer = run.steps.get(name="triage").result["answer"]
    assert "not posted (declined)" in answer


def test_changed_arguments_supersede_the_old_request_and_its_link_says_so(
        ann, client, mailoutbox):
    run = start_triage(LARGE, notes=CHANGE_ARGS)
    first = _waiting_call(run)
    schedule.sweep()
    old = ApprovalRequest.objects.get(run=run)
    (old_mail,) = mailoutbox
    # Declined elsewhere (an operator, a drill) while the request is still pending; the
    # model then proposes another amount.
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=first.ref,
                                 args_hash=first.args_hash, approved=False,
                                 actor=Actor.system("operator"), comment="split it")
    second = _waiting_call(run)
    assert second.args_hash != first.args_hash
    client.force_login(ann)
    schedule.sweep()
    old.refresh_from_db()
    new = ApprovalRequest.objects.get(run=run, status="pending")
    assert old.status == "superseded" and old.superseded_by_id == new.pk
    assert f"model proposed call {second.ref}" in old.comment
    assert new.tool_call_id == second.pk and new.params["args_hash"] == second.args_hash
    assert AuditRecord.objects.filter(run=run, action="approval_superseded").count() == 1
    # The old email's link says what happened and offers nothing to decide.
    response = client.get(_link(old_mail))
    assert response.status_code == 410
    text = response.content.decode()
    assert "superseded" in text and "the model proposed another tool call in its place" in text
    assert f"Request {new.pk}" in text
    # A decision posted on the old request decides nothing.
    response = _decide(client, old, "approve")
    assert response.url == reverse("approvals:detail", args=[new.pk])
    assert LedgerEntry.objects.count() == 0
    _decide(client, new, "approve")
    run = _advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert f"{LedgerEntry.objects.get().amount:.2f}" == second.arguments["amount"]


def test_an_approval_of_a_call_the_model_moved_on_from_withdraws_its_request(ann):
    run = start_triage(LARGE, notes=CHANGE_ARGS)
    first = _waiting_call(run)
    schedule.sweep()
    old = ApprovalRequest.objects.get(run=run)
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=first.ref,
                                 args_hash=first.args_hash, approved=False,
                                 actor=Actor.system("operator"), comment="split it")
    _waiting_call(run)  # the model proposed another amount; no sweep has run yet
    # The approval arrives before the sweep withdraws its request: the run waits on another
    # call now, so the decision withdraws it as the sweep would, and approves nothing.
    result = decisions.decide(old.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    old.refresh_from_db()
    assert result.outcome == "closed" and "withdrawn" in result.message
    assert old.status == "withdrawn" and old.decided_by_id is None
    assert f"tool call {first.ref} declined" in old.comment
    assert LedgerEntry.objects.count() == 0
    assert ToolCall.objects.get(pk=first.pk).status == "declined"


def test_a_user_who_is_not_an_approver_is_answered_not_found_and_decides_nothing(ann, carol,
                                                                                 client):
    run = start_triage(LARGE)
    call = _waiting_call(run)
    schedule.sweep()
    request = ApprovalRequest.objects.get(run=run)
    client.force_login(carol)
    assert client.get(reverse("approvals:detail", args=[request.pk])).status_code == 404
    assert _decide(client, request, "approve").status_code == 404
    request.refresh_from_db()
    call.refresh_from_db()
    assert request.status == "pending" and call.status == "waiting"
    assert LedgerEntry.objects.count() == 0


def test_of_two_approvers_the_first_decision_counts_and_the_call_runs_once(
        ann, bob, client):
    run = start_triage(LARGE)
    _waiting_call(run)
    schedule.sweep()
    request = ApprovalRequest.objects.get(run=run)
    first = decisions.decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    second = decisions.decide(request.pk, user=bob, approved=False, decision_id=uuid.uuid4(),
                              comment="too much")
    assert first.recorded and second.outcome == "already_decided"
    run = _advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.count() == 1


def test_a_tool_call_nobody_approves_in_time_is_escalated_then_declined(ann, dora):
    run = start_triage(LARGE)
    call = _waiting_call(run)
    t0 = timezone.now()
    schedule.sweep(now=t0)
    request = ApprovalRequest.objects.get(run=run)
    assert request.on_timeout == "escalate"
    schedule.sweep(now=t0 + timedelta(days=2, minutes=1))
    request.refresh_from_db()
    assert request.escalation_level == 1 and dora.has_perm(
        "approvals.decide_approvalrequest", request)
    schedule.sweep(now=t0 + timedelta(days=4, minutes=2))
    request.refresh_from_db()
    call.refresh_from_db()
    assert request.status == "expired" and request.settled_at and not request.apply_error
    assert call.status == "declined"
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.QUEUED
    assert LedgerEntry.objects.count() == 0


def test_the_operator_who_sent_a_call_again_may_not_approve_it(ann, bob, client, mailoutbox):
    """Four eyes on a resend: an approval is spent by the send it authorised, so a retried
    call waits for a person again, and the operator who retried it (ann, an approver too)
    is the request's requester: not asked, not shown it, refused when deciding, by the same
    rule (approvals.permissions.can_decide) as an operator action's requester."""
    from django.core.exceptions import PermissionDenied

    from approvals.selectors import inbox
    from demo.sandbox import faults

    faults.add("ledger.post", faults.FORBIDDEN, times=1)
    run = start_triage(LARGE)
    call = _waiting_call(run)
    schedule.sweep()
    first = ApprovalRequest.objects.get(run=run)
    assert first.requested_by_id is None  # the model asked: nobody to exclude
    assert decisions.decide(first.pk, user=ann, approved=True,
                            decision_id=uuid.uuid4()).recorded
    run = _advance(run)
    call.refresh_from_db()
    assert run.status == RunStatus.ATTENTION and call.status == "failed"
    assert LedgerEntry.objects.count() == 0

    transitions.retry_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                actor=Actor.for_user(ann), reason="the ledger granted it")
    call.refresh_from_db()
    assert call.approved_hash == "" and AuditRecord.objects.get(
        run=run, action="step_retried", data__tool_call=call.ref).data["approval_spent"]
    assert _waiting_call(run).pk == call.pk  # the same call, the same key, waiting again
    mailoutbox.clear()
    schedule.sweep()
    second = ApprovalRequest.objects.get(run=run, settled_at__isnull=True)
    assert second.tool_call_id == call.pk and second.requested_by_id == ann.pk
    assert [m.to for m in mailoutbox] == [["bob@example.com"]]
    assert second not in inbox(ann) and second in inbox(bob)
    with pytest.raises(PermissionDenied):
        decisions.decide(second.pk, user=ann, approved=True, decision_id=uuid.uuid4())
    client.force_login(ann)
    assert _decide(client, second, "approve").status_code == 403
    # The transition holds the rule for every caller, not only for the approval pages.
    with pytest.raises(SecondPersonRequired, match="a second person decides"):
        transitions.decide_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                     args_hash=call.args_hash, approved=True,
                                     actor=Actor.for_user(ann))
    second.refresh_from_db()
    assert second.status == "pending" and LedgerEntry.objects.count() == 0

    assert decisions.decide(second.pk, user=bob, approved=True,
                            decision_id=uuid.uuid4()).recorded
    run = _advance(run)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert LedgerEntry.objects.filter(transaction_ref=call.idempotency_key).count() == 1


def test_a_decision_on_a_call_cancelled_before_the_sweep_withdraws_the_request(ann, client):
    """The cancel commits; before the sweep withdraws the request, the approver opens it and
    approves: nobody is recorded as approving a call that never runs, and the page offers no
    form for it."""
    run = start_triage(LARGE)
    call = _waiting_call(run)
    schedule.sweep()
    request = ApprovalRequest.objects.get(run=run)
    operator = Actor.system("operator-test")
    transitions.cancel_tool_call(run.pk, step_name="triage", call_ref=call.ref,
                                 actor=operator, reason="wrong cost centre")
    client.force_login(ann)
    page = client.get(reverse("approvals:detail", args=[request.pk])).content.decode()
    assert "no longer waits for this decision" in page and 'value="approve"' not in page

    decision = decisions.decide(request.pk, user=ann, approved=True,
                                decision_id=uuid.uuid4())
    assert decision.outcome == "closed" and "withdrawn" in decision.message
    request.refresh_from_db()
    assert request.status == "withdrawn" and request.decided_by_id is None
    assert f"tool call {call.ref} cancelled" in request.comment
    assert AuditRecord.objects.filter(run=run, action="approval_withdrawn").count() == 1
    assert not AuditRecord.objects.filter(run=run, actor_label="ann").exists()
    call.refresh_from_db()
    assert call.status == "cancelled" and call.attempt == 0
    assert schedule.withdraw_stale_requests() == 0  # nothing left for the sweep
    _advance(run)
    assert LedgerEntry.objects.count() == 0


def test_a_request_for_changed_arguments_locks_the_run_before_the_one_it_supersedes():
    # As a decision does: the approver of the old request deciding at that moment and the
    # sweep opening the new one would otherwise deadlock.
    run = start_triage(LARGE, notes=CHANGE_ARGS)
    first = _waiting_call(run)
    schedule.sweep()
    old = ApprovalRequest.objects.get(run=run)
    transitions.decide_tool_call(run.pk, step_name="triage", call_ref=first.ref,
                                 args_hash=first.args_hash, approved=False,
                                 actor=Actor.system("operator"), comment="split it")
    second = _waiting_call(run)

    (new,) = while_a_decision_holds_the_run(
        run.pk, old.pk, lambda: requests.open_tool_call_request(second))
    old.refresh_from_db()
    assert old.status == "superseded" and old.superseded_by_id == new.pk
