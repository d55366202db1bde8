"""An approval request made before a field key left FIELD_ENCRYPTION_KEYS reaches its due time
before any reminder or decision: nobody can decide it until the key is back, so its timeout
policy is not applied. Escalated, its deputies would be mailed a request none of them can
decide; rejected or cancelled, the system would decide what nobody could look at. The sweep
holds its run for the key (sealed_value_unreadable) and withdraws the request, as a reminder
due does: nothing decided, nobody mailed. So does a person's decision that arrives after the
due time, before the sweep: the key is asked before the timeout, whoever comes first."""

import uuid
from datetime import timedelta

import pytest
from cryptography.fernet import Fernet

from approvals import notifications, requests, schedule
from approvals.decisions import decide
from approvals.models import ApprovalRequest, Notification, RequestStatus
from audit.models import AuditRecord
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, Run, RunStatus, StepStatus
from tests.approvals.conftest import later
from tests.factories import SYSTEM, new_run, step
from tests.workflows import FAST, OrderIn

pytestmark = pytest.mark.django_db

OLD = Fernet.generate_key().decode()
NEW = Fernet.generate_key().decode()
IBAN = "DE89370400440532013000"
WORKFLOW = "test-timeout-of-a-sealed-account"


@pytest.fixture(params=["escalate", "reject", "cancel"])
def on_timeout(request, script):
    """A read step returning a bank account it declares sensitive, an approval step whose
    snapshot shows the account, due after a day with the timeout policy of the parameter
    (its reminder would come only after a week), and the payment after it."""
    workflow = Workflow(WORKFLOW, version=1, input=OrderIn)

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @workflow.approval("approve", approvers=("group:approvers",),
                       remind_every=timedelta(days=7), timeout=timedelta(days=1),
                       on_timeout=request.param,
                       escalate_to=("group:finance-deputies",)
                       if request.param == "escalate" else ())
    def approve(ctx):
        account = ctx.results["fetch-account"]
        return {"holder": account["holder"], "iban": account["iban"],
                "amount": ctx.input.amount}

    @workflow.write("pay", retry=FAST, honours_key=True)
    def pay(ctx):
        script.calls.append((ctx.step, ctx.key, ctx.attempt))
        return {"ref": "pay-1"}

    yield request.param
    definition.registry.unregister(workflow)


def _asked(settings, t0, mailoutbox) -> ApprovalRequest:
    """The request made with the key in the ring, its first mails sent and put aside; then
    the key taken out of the ring."""
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = new_run(WORKFLOW)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    assert notifications.publish_notifications(now=t0).sent == 2
    mailoutbox.clear()
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}
    return ApprovalRequest.objects.get()


def _records(run, action):
    return AuditRecord.objects.filter(run=run, action=action)


def _held_and_nothing_decided(request: ApprovalRequest, mailoutbox, at) -> Run:
    run = Run.objects.get(pk=request.run_id)
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE
    assert "'old'" in run.status_message and "put the key it was sealed with back" in \
        run.status_message
    assert IBAN not in run.status_message
    assert step(run, "approve").status == StepStatus.WAITING
    request.refresh_from_db()
    assert request.status == RequestStatus.WITHDRAWN
    assert request.escalation_level == 0
    assert (request.decided_by, request.decided_by_label, request.decision_id) == \
        (None, "", None)
    assert _records(run, "approval_unaskable").count() == 1
    assert _records(run, "approval_withdrawn").count() == 1
    for never in ("approval_escalated", "approval_decided", "approval_timed_out",
                  "approval_reminded"):
        assert not _records(run, never).exists(), never
    # Nobody is mailed: no escalation to the deputies, nothing else either.
    assert not Notification.objects.filter(kind="escalation").exists()
    assert notifications.publish_notifications(now=at).sent == 0
    assert mailoutbox == []
    return run


def _asked_again_once_the_key_is_back(run: Run, ann, settings, t0, script) -> None:
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}
    transitions.resume(run.pk, actor=SYSTEM, reason="field key old put back")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert requests.open_pending_requests(now=t0) == 1
    asked_again = ApprovalRequest.objects.get(status=RequestStatus.PENDING)
    assert decide(asked_again.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                  now=t0).outcome == "recorded"
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert [c[0] for c in script.calls if c[0] == "pay"] == ["pay"]


def test_the_sweep_holds_the_run_for_the_key_instead_of_applying_the_timeout(
        on_timeout, approvers, dora, ann, t0, settings, mailoutbox, script):
    request = _asked(settings, t0, mailoutbox)
    due = later(request.due_at, seconds=1)

    report = schedule.sweep(now=due)

    assert (report.escalated, report.timed_out, report.reminded) == (0, 0, 0)
    assert report.withdrawn == 1
    run = _held_and_nothing_decided(request, mailoutbox, due)
    # The sweep found it: the hold's record names the approvals system.
    held = _records(run, "approval_unaskable").get()
    assert (held.actor_kind, held.actor_label, held.actor_user_id) == \
        ("system", "approvals", None)

    # The next passes: nothing held twice, nothing decided, nobody mailed.
    schedule.sweep(now=later(due, days=3))
    assert _records(run, "approval_unaskable").count() == 1
    assert not _records(run, "approval_decided").exists()
    assert mailoutbox == [] and ApprovalRequest.objects.count() == 1
    assert step(run, "pay").attempt == 0

    _asked_again_once_the_key_is_back(run, ann, settings, t0, script)


def test_a_decision_after_the_due_time_holds_the_run_for_the_key_before_the_timeout(
        on_timeout, approvers, dora, ann, t0, settings, mailoutbox, script):
    request = _asked(settings, t0, mailoutbox)
    due = later(request.due_at, seconds=1)

    said = decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(), now=due)

    assert said.outcome == "unavailable", said.message
    assert "sealed with a key this installation no longer holds" in said.message
    assert "run is held until an operator puts the key back" in said.message
    run = _held_and_nothing_decided(request, mailoutbox, due)
    # ann's decision found it: the hold's record names her.
    held = _records(run, "approval_unaskable").get()
    assert (held.actor_kind, held.actor_label, held.actor_user_id) == ("user", "ann", ann.pk)
    assert schedule.sweep(now=later(due, minutes=1)).timed_out == 0
    assert not _records(run, "approval_decided").exists()
    assert step(run, "pay").attempt == 0

    _asked_again_once_the_key_is_back(run, ann, settings, t0, script)
