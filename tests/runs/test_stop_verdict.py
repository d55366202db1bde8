"""The `stop` verdict is enforced: a high-impact payment with no lookup by key, to a receiver
that ignores keys, never runs unattended. With a real worker, nothing is paid until a
person approves the attempt; then it is paid once; a retry after a transient error asks
again, as does an operator's retry; a rejection pays nothing. Payments are counted at a real
HTTP receiver. An agent tool with the stop verdict waits before each call attempt alike."""

import json

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from approvals import decisions, requests
from approvals.models import ApprovalRequest, RequestStatus
from audit.actions import AuditAction
from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry
from runs.definitions.contracts import STOP, effect_verdict, workflow_verdict
from runs.execution import executor
from runs.machine import transitions
from runs.machine.transitions import start_run
from runs.models import AttentionReason, RunStatus, StepStatus, ToolCallStatus
from tests.agent_runs import SMALL, advance
from tests.factories import SYSTEM
from tests.processes import start_worker, stop, until_status, wait_for
from tests.receiver import ScriptedReceiver
from tests.workflows import stop_receiver, unsettleable

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _approval_settings(settings, empty_broker):
    settings.APPROVALS_BASE_URL = "http://testserver"
    settings.APPROVAL_LINK_MAX_AGE = 3 * 24 * 3600
    settings.APPROVALS_SETTLE_RETRY_SECONDS = 60


@pytest.fixture
def receiver():
    with ScriptedReceiver() as server:
        stop_receiver.url = server.url
        yield server
    stop_receiver.url = ""


@pytest.fixture
def worker(receiver, tmp_path):
    process = start_worker("stop-verdict", tmp_path, TEST_STOP_RECEIVER_URL=receiver.url)
    yield process
    stop(process)


@pytest.fixture
def approver(db):
    user = User.objects.create_user("pia", email="pia@example.com", password="pw")
    user.groups.add(Group.objects.get_or_create(name="stop-approvers")[0])
    return user


def _paid(receiver) -> int:
    return len(receiver.sent("POST", "/pay"))


def _start(order: str):
    run, _ = start_run(workflow="test-stop-verdict", business_key=order,
                       input={"order": order, "amount": 120}, actor=SYSTEM)
    return run


def _asked(run, count: int) -> ApprovalRequest:
    """Wait until the run waits for a person and the approvals sweep has opened the
    `count`-th request; return that request."""
    run = until_status(run, RunStatus.WAITING)

    def opened():
        requests.open_pending_requests()
        asked = ApprovalRequest.objects.filter(run=run).order_by("pk")
        return asked[count - 1] if asked.count() >= count else None

    return wait_for(opened, timeout=30, what=f"approval request {count} of run {run.pk}")


def _decide(approval: ApprovalRequest, user, *, approved: bool, comment: str = ""):
    outcome = decisions.decide(approval.pk, user=user, approved=approved,
                               decision_id=f"00000000-0000-0000-0000-{approval.pk:012d}",
                               comment=comment)
    assert outcome.recorded, outcome.message


def test_the_probe_workflow_has_the_stop_verdict():
    spec = unsettleable.step("pay-unkeyed")
    assert workflow_verdict(unsettleable).decision == STOP
    verdict = effect_verdict(spec)
    assert verdict is not None and verdict.decision == STOP
    assert "no reconcile function" in verdict.reason


def test_the_command_names_each_effect_that_waits_for_a_person(capsys):
    call_command("recovery_contract", "test-stop-verdict")
    assert "pay-unkeyed: stop: a person approves each attempt" in capsys.readouterr().out
    call_command("recovery_contract", "test-triage-stop-verdict")
    out = capsys.readouterr().out
    assert "verdict: stop: tool triage/post-ledger has no reconcile function" in out
    assert "triage/post-ledger: stop: a person approves each attempt" in out
    assert "triage/open-approval-task:" not in out  # it reconciles by key


def test_nothing_is_paid_until_a_person_approves_then_paid_once(receiver, worker, approver):
    run = _start("stop-1")
    approval = _asked(run, 1)

    # The worker had the run and left it waiting: nothing was sent.
    assert _paid(receiver) == 0
    step = run.steps.get(name="pay-unkeyed")
    assert step.status == StepStatus.WAITING and step.attempt == 0
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    assert "waits for a person before attempt 1" in run.status_message
    assert "no reconcile function" in run.status_message
    # The request names the intended action, where it goes, and why a person decides.
    assert approval.snapshot["intended_action"] == "pay 120 EUR for order stop-1"
    assert approval.snapshot["system"] == "payments receiver"
    assert approval.snapshot["attempt"] == 1
    assert approval.snapshot["verdict"] == STOP
    assert "receiver ignores keys" in approval.snapshot["why_a_person_approves"]
    assert approval.approvers == ["group:stop-approvers"]

    _decide(approval, approver, approved=True)
    run = until_status(run, RunStatus.COMPLETED)

    assert _paid(receiver) == 1
    step = run.steps.get(name="pay-unkeyed")
    assert step.status == StepStatus.SUCCEEDED and step.attempt == 1
    assert step.approved_attempt == 1
    approval.refresh_from_db()
    assert approval.status == RequestStatus.APPROVED and approval.settled_at is not None
    decided = AuditRecord.objects.get(run=run, action="approval_decided")
    assert decided.data["decision_id"] == str(approval.decision_id)
    assert decided.data["attempt"] == 1


def test_a_retry_after_a_transient_error_asks_again(receiver, worker, approver):
    receiver.answer("POST", "/pay", 503, 200)
    run = _start("stop-2")
    first = _asked(run, 1)
    _decide(first, approver, approved=True)

    # The first attempt met a 503 (nothing paid); the retry waits for a new approval.
    second = _asked(run, 2)
    assert _paid(receiver) == 1  # the refused request, and no other
    assert second.pk != first.pk and second.snapshot["attempt"] == 2
    step = run.steps.get(name="pay-unkeyed")
    assert step.status == StepStatus.WAITING and step.attempt == 1
    assert step.approved_attempt == 1  # the first approval does not carry over
    # Wait a while longer: the worker does not send the retry on its own.
    until_status(run, RunStatus.WAITING)
    assert _paid(receiver) == 1

    _decide(second, approver, approved=True)
    run = until_status(run, RunStatus.COMPLETED)
    assert _paid(receiver) == 2
    step = run.steps.get(name="pay-unkeyed")
    assert step.status == StepStatus.SUCCEEDED and step.attempt == 2
    assert ApprovalRequest.objects.filter(run=run).count() == 2


def test_a_rejection_pays_nothing(receiver, worker, approver):
    run = _start("stop-3")
    approval = _asked(run, 1)
    _decide(approval, approver, approved=False, comment="not this vendor")

    run = until_status(run, RunStatus.ATTENTION)
    assert run.attention_reason == AttentionReason.APPROVAL_REJECTED
    step = run.steps.get(name="pay-unkeyed")
    assert step.status == StepStatus.FAILED and step.attempt == 0
    assert "rejected by pia: not this vendor; nothing was sent" in step.error_message
    # However often it is swept and woken, nothing is sent.
    until_status(run, RunStatus.ATTENTION)
    assert _paid(receiver) == 0
    assert ApprovalRequest.objects.filter(run=run).count() == 1


def test_a_tool_with_the_stop_verdict_waits_for_a_person_before_each_call(live_sandbox):

    # The tool's approvers, before the request grants them the decision.
    approver = User.objects.create_user("tia", password="pw")
    approver.groups.add(Group.objects.get_or_create(name="approvers")[0])
    # A small amount: the demo's approve_if would post it without asking anyone.
    data = {"tenant": "tenant-42", "invoice_number": SMALL,
            "requester_email": "requester@example.com", "notes": ""}
    run, _ = transitions.start_run(workflow="test-triage-stop-verdict",
                                   business_key=f"stop:{SMALL}", input=data, actor=SYSTEM,
                                   wake=False)
    run = advance(run)
    assert run.status == RunStatus.WAITING
    (call,) = transitions.waiting_tool_calls(run)
    assert call.tool == "post-ledger"
    assert LedgerEntry.objects.count() == 0

    assert requests.open_pending_requests() == 1
    approval = ApprovalRequest.objects.get(run=run, tool_call=call)
    assert approval.snapshot["verdict"] == STOP and approval.snapshot["attempt"] == 1
    assert "no reconcile function" in approval.snapshot["why_a_person_approves"]
    # The approved attempt meets a 503: its retry waits for a person again.
    faults.add("ledger.post", faults.UNAVAILABLE, times=1)
    _decide(approval, approver, approved=True)

    run = advance(run)
    assert run.status == RunStatus.WAITING
    call.refresh_from_db()
    assert call.status == ToolCallStatus.WAITING and call.attempt == 1
    assert call.approved_hash == ""  # spent by the attempt it allowed
    assert LedgerEntry.objects.count() == 0
    # The wait begun again is the current try: neither the call nor its step shows the
    # 503 of the attempt before, which that attempt's record keeps.
    assert (call.error_class, call.error_message) == ("", "")
    triage = run.steps.get(name="triage")
    assert (triage.error_class, triage.error_message) == ("", "")
    assert any("503" in json.dumps(r.data) for r in AuditRecord.objects.filter(
        run=run, step_name="triage", action=AuditAction.RETRY_SCHEDULED))
    assert requests.open_pending_requests() == 1
    second = ApprovalRequest.objects.filter(run=run, tool_call=call).order_by("pk").last()
    assert second.pk != approval.pk and second.snapshot["attempt"] == 2
    _decide(second, approver, approved=True)

    run = advance(run)
    assert run.status == RunStatus.COMPLETED
    assert LedgerEntry.objects.count() == 1
    call.refresh_from_db()
    assert call.attempt == 2 and call.approved_hash == ""


def test_an_operator_retry_asks_again_before_it_sends(receiver, approver):

    # The first attempt is refused for good (400): attention, then an operator retries.
    receiver.answer("POST", "/pay", 400, 200)
    run = _start("stop-4")
    executor.advance_run(run.pk, worker="w1")
    assert requests.open_pending_requests() == 1
    _decide(ApprovalRequest.objects.get(run=run), approver, approved=True)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION and _paid(receiver) == 1

    transitions.retry_step(run.pk, step_name="pay-unkeyed", actor=SYSTEM,
                           reason="vendor fixed its account")
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    # The operator's retry is an attempt like any other: a person approves it first.
    assert run.status == RunStatus.WAITING and _paid(receiver) == 1
    assert requests.open_pending_requests() == 1
    second = ApprovalRequest.objects.filter(run=run).order_by("pk").last()
    assert second.snapshot["attempt"] == 2
    _decide(second, approver, approved=True)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.COMPLETED and _paid(receiver) == 2
