"""An approval step whose snapshot reads a value sealed with a field key FIELD_ENCRYPTION_KEYS
no longer holds cannot be asked for: its run is held for a person as a sealed value that
cannot be opened (sealed_value_unreadable, the reason steps and tool calls are held with),
its message naming the key and the cure, not as an approval request that cannot be made
(approval_unaskable, whose cure is the code). Its next step is to put the key back, then
Resume, which asks the approvers; nothing after the approval was sent meanwhile. A request
made before the key left is decided by nobody, and reminded to nobody: the first decision,
or the first reminder due, holds the run so and withdraws the request."""

import uuid

import pytest
from cryptography.fernet import Fernet

from approvals import notifications, requests, schedule
from approvals.decisions import decide
from approvals.models import ApprovalRequest, Notification, NotificationKind, RequestStatus
from audit.models import AuditRecord
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from runs.operator.guidance import recommend
from tests.approvals.conftest import later
from tests.factories import SYSTEM, new_run, step
from tests.workflows import FAST, OrderIn, script

pytestmark = pytest.mark.django_db

OLD = Fernet.generate_key().decode()
NEW = Fernet.generate_key().decode()
IBAN = "DE89370400440532013000"


@pytest.fixture
def paying_to_an_account(script):
    """A read step returning a bank account it declares sensitive, an approval step whose
    snapshot shows the account, and the payment after it."""
    workflow = Workflow("test-approval-of-a-sealed-account", version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject")
    def approve(ctx):
        account = ctx.results["fetch-account"]
        return {"holder": account["holder"], "iban": account["iban"],
                "amount": ctx.input.amount}

    @workflow.write("pay", retry=FAST, honours_key=True)
    def pay(ctx):
        script.calls.append((ctx.step, ctx.key, ctx.attempt))
        return {"ref": "pay-1"}

    yield workflow
    definition.registry.unregister(workflow)


def test_the_run_is_held_for_the_key_and_resumed_once_it_is_back(
        paying_to_an_account, approvers, t0, settings):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = new_run("test-approval-of-a-sealed-account")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}  # "old" was taken out of the ring
    assert requests.open_pending_requests(now=t0) == 0

    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert run.status_message.startswith("approve: no approval request can be made: ")
    assert "'old'" in run.status_message and "FIELD_ENCRYPTION_KEYS" in run.status_message
    assert "put the key it was sealed with back" in run.status_message
    assert IBAN not in run.status_message
    assert step(run, "approve").status == StepStatus.WAITING
    assert not ApprovalRequest.objects.exists() and not Notification.objects.exists()
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    # The next sweep holds nothing twice.
    assert requests.open_pending_requests(now=t0) == 0
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1

    advice = recommend(run, list(run.steps.all()))
    assert advice.reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert advice.action is not None and advice.action.name == "resume"
    assert "FIELD_ENCRYPTION_KEYS" in advice.why and "nothing was sent" in advice.why
    assert "resume" in advice.why and "fix the code" not in advice.why

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}  # put back, after the current
    transitions.resume(run.pk, actor=SYSTEM, reason="field key old put back")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    request = ApprovalRequest.objects.get()
    assert request.run_id == run.pk and request.snapshot["iban"] == "[redacted]"
    assert Run.objects.get(pk=run.pk).status == RunStatus.WAITING
    # Nothing after the approval was sent, at any point.
    assert step(run, "pay").attempt == 0 and not [c for c in script.calls if c[0] == "pay"]


def test_a_decision_once_the_key_is_gone_holds_the_run_for_the_key_and_decides_nothing(
        paying_to_an_account, approvers, ann, t0, settings, caplog, script):
    """The key left the ring after the request was made: nobody can decide it until the key
    is back. The first decision holds the run for the key at once (sealed_value_unreadable,
    through the transition the sweep holds an unaskable wait with), where it was held only
    once the request was asked again; the person is told what it means and that nothing was
    decided, in words of theirs (no exception's name); the key's name and the cure are in
    the log for operators. The request is withdrawn; with the key back and the run resumed,
    the approvers are asked again, one decision is recorded, and the payment is sent once."""
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = new_run("test-approval-of-a-sealed-account")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    request = ApprovalRequest.objects.get()

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}
    said = decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(), now=t0)
    assert said.outcome == "unavailable"
    assert "sealed with a key this installation no longer holds" in said.message
    assert "nothing was decided" in said.message
    assert "run is held until an operator puts the key back" in said.message
    assert "UnreadableValue" not in said.message and "FIELD_ENCRYPTION_KEYS" not in said.message
    assert IBAN not in said.message
    logged = [r.getMessage() for r in caplog.records if f"request {request.pk}" in
              r.getMessage()]
    assert any("'old'" in line and "FIELD_ENCRYPTION_KEYS" in line for line in logged)

    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert "'old'" in run.status_message and "FIELD_ENCRYPTION_KEYS" in run.status_message
    assert "put the key it was sealed with back" in run.status_message
    assert IBAN not in run.status_message
    assert step(run, "approve").status == StepStatus.WAITING
    advice = recommend(run, list(run.steps.all()))
    assert advice.reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert advice.action is not None and advice.action.name == "resume"
    request.refresh_from_db()
    assert request.status == RequestStatus.WITHDRAWN
    assert request.decided_by is None and request.decision_id is None
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    assert AuditRecord.objects.filter(run=run, action="approval_withdrawn").count() == 1
    assert AuditRecord.objects.filter(run=run, action="approval_decided").count() == 0

    # Decided again, and swept: nothing held twice, nothing decided, nothing asked.
    assert decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                  now=t0).outcome == "closed"
    assert requests.open_pending_requests(now=t0) == 0
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    assert AuditRecord.objects.filter(run=run, action="approval_decided").count() == 0
    assert ApprovalRequest.objects.count() == 1
    assert step(run, "pay").attempt == 0 and not [c for c in script.calls if c[0] == "pay"]

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}
    transitions.resume(run.pk, actor=SYSTEM, reason="field key old put back")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    asked_again = ApprovalRequest.objects.exclude(pk=request.pk).get()
    assert decide(asked_again.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                  now=t0).outcome == "recorded"
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert AuditRecord.objects.filter(run=run, action="approval_decided").count() == 1
    assert [c[0] for c in script.calls if c[0] == "pay"] == ["pay"]


def _asked(settings, t0, mailoutbox) -> ApprovalRequest:
    """The request made with the key in the ring, its first mails sent and put aside."""
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = new_run("test-approval-of-a-sealed-account")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    assert notifications.publish_notifications(now=t0).sent == 2
    mailoutbox.clear()
    return ApprovalRequest.objects.get()


def _reminders() -> int:
    return Notification.objects.filter(kind=NotificationKind.REMINDER).count()


def test_a_reminder_due_once_the_key_is_gone_holds_the_run_for_the_key_and_reminds_nobody(
        paying_to_an_account, approvers, t0, settings, mailoutbox):
    """The key left the ring after the request was made, and its reminder comes due: the
    approvers are not reminded of a request none of them can decide. The reminder sweep
    holds the run for the key (sealed_value_unreadable) and withdraws the request, as a
    person's decision would have, where it used to remind them every day until the
    request timed out."""
    request = _asked(settings, t0, mailoutbox)
    run = request.run

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}
    assert schedule.send_reminders(now=later(t0, hours=24)) == 0
    assert _reminders() == 0
    assert notifications.publish_notifications(now=later(t0, hours=24)).sent == 0
    assert mailoutbox == []

    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert "'old'" in run.status_message and "put the key it was sealed with back" in \
        run.status_message
    assert IBAN not in run.status_message
    assert step(run, "approve").status == StepStatus.WAITING
    request.refresh_from_db()
    assert request.status == RequestStatus.WITHDRAWN and request.reminder_count == 0
    assert request.decided_by is None
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    assert AuditRecord.objects.filter(run=run, action="approval_withdrawn").count() == 1
    assert AuditRecord.objects.filter(run=run, action="approval_reminded").count() == 0

    # The next passes, reminders and the whole sweep: nothing held twice, nobody reminded.
    assert schedule.send_reminders(now=later(t0, hours=48)) == 0
    schedule.sweep(now=later(t0, hours=48))
    assert AuditRecord.objects.filter(run=run, action="approval_unaskable").count() == 1
    assert _reminders() == 0 and mailoutbox == []
    assert ApprovalRequest.objects.count() == 1
    assert step(run, "pay").attempt == 0


def test_a_reminder_due_with_the_key_in_the_ring_is_sent_as_before(
        paying_to_an_account, approvers, t0, settings, mailoutbox):
    request = _asked(settings, t0, mailoutbox)

    assert schedule.send_reminders(now=later(t0, hours=24)) == 1
    assert _reminders() == 2
    assert notifications.publish_notifications(now=later(t0, hours=24)).sent == 2
    assert sorted(m.to[0] for m in mailoutbox) == ["ann@example.com", "bob@example.com"]
    assert IBAN not in "".join(m.body for m in mailoutbox)

    request.refresh_from_db()
    assert request.status == RequestStatus.PENDING and request.reminder_count == 1
    assert Run.objects.get(pk=request.run_id).status == RunStatus.WAITING
    assert AuditRecord.objects.filter(run=request.run, action="approval_unaskable").count() == 0
    assert AuditRecord.objects.filter(run=request.run, action="approval_reminded").count() == 1


def test_the_hold_names_the_person_whose_decision_found_it(
        paying_to_an_account, approvers, ann, t0, settings, mailoutbox):
    """ann acted: her decision is what found the request nobody can decide, and what held
    its run, so the run's history names her for the hold, not the approvals system."""
    request = _asked(settings, t0, mailoutbox)
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}

    assert decide(request.pk, user=ann, approved=False, comment="cannot check the account",
                  decision_id=uuid.uuid4(), now=t0).outcome == "unavailable"

    held = AuditRecord.objects.get(run=request.run, action="approval_unaskable")
    assert (held.actor_kind, held.actor_label, held.actor_user_id) == ("user", "ann", ann.pk)


def test_the_withdrawal_that_follows_the_hold_names_the_same_person(
        paying_to_an_account, approvers, ann, t0, settings, mailoutbox):
    """Her decision held the run and, in the same act, withdrew the request the held run no
    longer waits for: both records name her, not one her and the other the system."""
    request = _asked(settings, t0, mailoutbox)
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}

    decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(), now=t0)

    withdrawn = AuditRecord.objects.get(run=request.run, action="approval_withdrawn")
    assert (withdrawn.actor_kind, withdrawn.actor_label, withdrawn.actor_user_id) == \
        ("user", "ann", ann.pk)
    assert ApprovalRequest.objects.get(pk=request.pk).decided_by_id is None


def test_the_hold_the_reminder_sweep_makes_names_the_approvals_system(
        paying_to_an_account, approvers, t0, settings, mailoutbox):
    request = _asked(settings, t0, mailoutbox)
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}

    assert schedule.send_reminders(now=later(t0, hours=24)) == 0

    held = AuditRecord.objects.get(run=request.run, action="approval_unaskable")
    assert (held.actor_kind, held.actor_label, held.actor_user_id) == \
        ("system", "approvals", None)
    withdrawn = AuditRecord.objects.get(run=request.run, action="approval_withdrawn")
    assert (withdrawn.actor_kind, withdrawn.actor_label, withdrawn.actor_user_id) == \
        ("system", "approvals", None)
