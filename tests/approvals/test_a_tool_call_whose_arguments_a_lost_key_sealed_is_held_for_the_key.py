"""An agent's tool call waits for a person's approval of its arguments, one of which (the
invoice-triage ledger posting's iban) is sealed; then its key leaves FIELD_ENCRYPTION_KEYS.
The request shows the value as the mask, so it reads as before, but approved, the call could
never be made: its arguments cannot be opened. Nobody can decide it until the key is back, as
for an approval step whose snapshot shows such a value: its reminder, its timeout and a
person's decision each hold the run for the key (sealed_value_unreadable) and withdraw the
request, reminding, escalating to and deciding for nobody, where its approvers used to be
reminded until it was escalated to the deputies. With the key back and the run resumed, the
call is asked for again and posted once. A call whose key left before its request was made
is asked of nobody: the sweep holds its run for the key as it opens the request. The agent
runs against the sandbox over real HTTP."""

import uuid

import pytest
from cryptography.fernet import Fernet

from approvals import notifications, requests, schedule
from approvals.decisions import decide
from approvals.models import ApprovalRequest, Notification, RequestKind, RequestStatus
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry
from runs.machine import sensitive, transitions
from runs.models import AttentionReason, Run, RunStatus, ToolCall, ToolCallStatus
from tests.agent_runs import LARGE, advance, start_triage
from tests.approvals.conftest import later
from tests.factories import SYSTEM, step

pytestmark = pytest.mark.django_db(transaction=True)

OLD = Fernet.generate_key().decode()
NEW = Fernet.generate_key().decode()


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def _asked(settings, t0, mailoutbox) -> tuple[ApprovalRequest, ToolCall]:
    """The posting's request, made and mailed with the key in the ring; then the key taken
    out of it."""
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING, run.status_message
    (call,) = transitions.waiting_tool_calls(run)
    assert sensitive.is_sealed(call.arguments["iban"])
    assert requests.open_pending_requests(now=t0) == 1
    request = ApprovalRequest.objects.get(run=run)
    assert request.kind == RequestKind.TOOL_CALL and request.tool_call_id == call.pk
    assert notifications.publish_notifications(now=t0).sent == 2
    mailoutbox.clear()
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}  # "old" was taken out of the ring
    return request, call


def _held_for_the_key(request: ApprovalRequest, call: ToolCall, mailoutbox, at) -> Run:
    run = Run.objects.get(pk=request.run_id)
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert run.status_message.startswith(
        f"triage tool call {call.ref}: no approval request can be made: ")
    assert "'old'" in run.status_message and "put the key it was sealed with back" in \
        run.status_message
    call.refresh_from_db()
    assert call.status == ToolCallStatus.WAITING and call.attempt == 0
    assert step(run, "triage").status == "waiting"
    request.refresh_from_db()
    assert request.status == RequestStatus.WITHDRAWN and request.reminder_count == 0
    assert request.escalation_level == 0 and request.decided_by is None
    held = AuditRecord.objects.get(run=run, action="approval_unaskable")
    assert held.step_name == "triage" and held.data["tool_call"] == call.ref
    assert AuditRecord.objects.filter(run=run, action="approval_withdrawn").count() == 1
    for never in ("approval_reminded", "approval_escalated", "tool_call_approval_decided"):
        assert not AuditRecord.objects.filter(run=run, action=never).exists(), never
    assert not Notification.objects.filter(kind__in=("reminder", "escalation")).exists()
    assert notifications.publish_notifications(now=at).sent == 0
    assert mailoutbox == []
    assert LedgerEntry.objects.count() == 0
    return run


def _posted_once_the_key_is_back(run: Run, call: ToolCall, ann, settings, t0) -> None:
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}
    transitions.resume(run.pk, actor=SYSTEM, reason="field key old put back")
    assert advance(run).status == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    asked_again = ApprovalRequest.objects.get(status=RequestStatus.PENDING)
    assert asked_again.tool_call_id == call.pk
    assert decide(asked_again.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                  now=t0).outcome == "recorded"
    assert advance(run).status == RunStatus.COMPLETED
    assert LedgerEntry.objects.filter(transaction_ref=call.idempotency_key).count() == 1


def test_its_reminder_holds_the_run_for_the_key_and_reminds_nobody(
        approvers, ann, t0, settings, mailoutbox):
    request, call = _asked(settings, t0, mailoutbox)
    due = later(request.next_reminder_at, seconds=1)

    assert schedule.send_reminders(now=due) == 0

    run = _held_for_the_key(request, call, mailoutbox, due)
    held = AuditRecord.objects.get(run=run, action="approval_unaskable")
    assert (held.actor_kind, held.actor_label) == ("system", "approvals")
    # The next passes: nothing held twice, nobody reminded.
    schedule.sweep(now=later(due, hours=8))
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    assert mailoutbox == [] and ApprovalRequest.objects.count() == 1

    _posted_once_the_key_is_back(run, call, ann, settings, t0)


def test_its_timeout_holds_the_run_for_the_key_and_mails_no_deputy(
        approvers, dora, ann, t0, settings, mailoutbox):
    request, call = _asked(settings, t0, mailoutbox)
    due = later(request.due_at, seconds=1)

    report = schedule.apply_timeouts(now=due)

    assert (report.escalated, report.timed_out, report.withdrawn) == (0, 0, 1)
    run = _held_for_the_key(request, call, mailoutbox, due)
    _posted_once_the_key_is_back(run, call, ann, settings, t0)


def test_a_decision_holds_the_run_for_the_key_and_decides_nothing(
        approvers, ann, t0, settings, mailoutbox):
    """Approved, the call would be failed by the worker as it opened the arguments, and a
    resend spends the approval: the decision is refused at once instead, as an approval
    step's is, and the hold's record names the person whose decision found it."""
    request, call = _asked(settings, t0, mailoutbox)

    said = decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(), now=t0)

    assert said.outcome == "unavailable", said.message
    assert "sealed with a key this installation no longer holds" in said.message
    assert "nothing was decided" in said.message
    run = _held_for_the_key(request, call, mailoutbox, t0)
    held = AuditRecord.objects.get(run=run, action="approval_unaskable")
    assert (held.actor_kind, held.actor_label, held.actor_user_id) == ("user", "ann", ann.pk)
    assert request.decision_id is None and call.approved_hash == ""

    _posted_once_the_key_is_back(run, call, ann, settings, t0)


def test_a_call_whose_key_left_before_it_was_asked_for_is_held_and_nobody_is_mailed(
        approvers, ann, t0, settings, mailoutbox):
    """The key left the ring before the sweep opened the posting's request: its approvers
    are not mailed about a call that, approved, could never be made, and the run is held for
    the key by the opening itself, as an approval step whose snapshot cannot open a sealed
    value is, where the request used to be opened and mailed and only its first reminder,
    timeout or decision held the run."""
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = advance(start_triage(LARGE))
    assert run.status == RunStatus.WAITING, run.status_message
    (call,) = transitions.waiting_tool_calls(run)
    assert sensitive.is_sealed(call.arguments["iban"])
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}  # "old" was taken out of the ring

    assert schedule.sweep(now=t0).opened == 0

    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert run.status_message.startswith(
        f"triage tool call {call.ref}: no approval request can be made: ")
    assert "'old'" in run.status_message and "put the key it was sealed with back" in \
        run.status_message
    call.refresh_from_db()
    assert call.status == ToolCallStatus.WAITING and call.attempt == 0
    assert not ApprovalRequest.objects.exists() and not Notification.objects.exists()
    held = AuditRecord.objects.get(run=run, action="approval_unaskable")
    assert held.data["tool_call"] == call.ref
    assert (held.actor_kind, held.actor_label) == ("system", "approvals")
    assert not AuditRecord.objects.filter(run=run, action="approval_opened").exists()
    assert mailoutbox == []
    # The next passes: nothing held twice, nobody asked.
    schedule.sweep(now=later(t0, hours=8))
    assert requests.open_pending_requests(now=later(t0, hours=8)) == 0
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    assert not ApprovalRequest.objects.exists() and mailoutbox == []
    assert LedgerEntry.objects.count() == 0

    _posted_once_the_key_is_back(run, call, ann, settings, t0)
