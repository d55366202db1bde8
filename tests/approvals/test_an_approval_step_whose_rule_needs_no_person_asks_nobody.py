"""An approval step may declare a rule (approve_if) saying when a person is needed: invoices
under 1,000 EUR need no approver. The worker that reaches the step asks the rule with the
snapshot a person would be shown. False: the workflow's rule approves the step, no request
is made, nobody is notified, the run goes on, and one audit record of its own, naming no
person, says so; the step's result is shaped as a person's approval leaves it, saying no
person was asked. True, as before: a request, a person decides. A rule that cannot be read
(it raises, it answers neither True nor False), or a snapshot that cannot be made (a sealed
value no key in the ring opens), leaves the step to a person: a rule never lets a step
through unasked by mistake. Once a person was asked about the step, a person decides it."""

import uuid

import pytest
from cryptography.fernet import Fernet

from approvals import notifications, requests
from approvals.decisions import decide
from approvals.models import ApprovalRequest, Notification
from approvals.snapshots import compute_snapshot
from audit.models import AuditRecord
from runs.definitions import definition
from runs.definitions.definition import Workflow
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransientError
from runs.models import AttentionReason, RunStatus, StepStatus
from tests.factories import SYSTEM, make_due, new_run, step
from tests.workflows import FAST, OrderIn

pytestmark = pytest.mark.django_db

BY_RULE = {"approved": True, "by": "the workflow's rule", "comment": "", "person_asked": False}


def records(run, action: str):
    return AuditRecord.objects.filter(run=run, action=action)


def paid(script) -> list[tuple]:
    # (approved, by) as the payment step read the approval from ctx.results.
    return [call[3:] for call in script.calls if call[0] == "pay"]


def test_an_amount_under_the_threshold_completes_the_run_asking_and_notifying_nobody(
        approvers, script, t0, mailoutbox):
    script.reset()
    run = new_run("test-approval-by-rule", amount=999)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED

    # The approvals sweep finds nothing to ask for and nobody to write to.
    assert requests.open_pending_requests(now=t0) == 0
    assert notifications.publish_notifications(now=t0).sent == 0
    assert not ApprovalRequest.objects.exists() and not Notification.objects.exists()
    assert mailoutbox == []
    approve = step(run, "approve")
    assert approve.status == StepStatus.SUCCEEDED
    assert approve.result == BY_RULE
    # Who approved it, as a person's approval leaves it ("approved by ann", below).
    assert approve.remote_ref == "approved by the workflow's rule"
    # The payment read the approval as it reads a person's, and was made once.
    assert paid(script) == [(True, "the workflow's rule")]
    # One record says it, naming no person; none says a person was asked or decided.
    (record,) = records(run, "approved_by_rule")
    assert record.actor_kind == "system" and record.actor_user_id is None
    assert record.step_name == "approve"
    assert record.data["decided_by"] == "the workflow's rule"
    assert record.data["person_asked"] is False
    assert record.after == {"step_status": "succeeded", "remote_ref": approve.remote_ref}
    # What the rule judged is what a request would have shown, by its hash.
    snapshot, digest = compute_snapshot(run, "approve")
    assert record.data["snapshot"] == snapshot and record.data["payload_hash"] == digest
    assert snapshot["amount"] == 999
    assert not records(run, "approval_requested").exists()
    assert not records(run, "approval_decided").exists()
    run.refresh_from_db()
    assert run.steps_done == 3


def test_an_amount_at_the_threshold_is_asked_of_a_person_as_before(
        approvers, ann, script, t0, mailoutbox):
    script.reset()
    run = new_run("test-approval-by-rule", amount=1000)

    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    assert step(run, "approve").status == StepStatus.WAITING
    assert records(run, "approval_requested").count() == 1
    assert requests.open_pending_requests(now=t0) == 1
    request = ApprovalRequest.objects.get(run=run)
    assert request.snapshot["amount"] == 1000
    assert notifications.publish_notifications(now=t0).sent == 2
    assert sorted(m.to[0] for m in mailoutbox) == ["ann@example.com", "bob@example.com"]
    assert paid(script) == []

    assert decide(request.pk, user=ann, approved=True, decision_id=uuid.uuid4(),
                  now=t0).outcome == "recorded"
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
    assert step(run, "approve").result == {"approved": True, "by": "ann", "comment": ""}
    assert step(run, "approve").remote_ref == "approved by ann"
    assert paid(script) == [(True, "ann")]
    assert not records(run, "approved_by_rule").exists()


def _declared_with(name: str, rule, fn=None) -> Workflow:
    workflow = Workflow(name, version=1, input=OrderIn)
    workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject",
                      approve_if=rule)(fn or (lambda ctx: {"amount": ctx.input.amount}))

    @workflow.write("pay", retry=FAST, honours_key=True)
    def pay(ctx):
        return {"ref": ctx.key}

    return workflow


def _missing_field(snapshot):
    return snapshot["total"] < 1000  # the snapshot has no "total"


RULES_THAT_CANNOT_BE_READ = {
    "raises": (_missing_field, "approve_if raised; a person decides"),
    "answers None": (lambda snapshot: None,
                     "approve_if answered a NoneType, neither True nor False"),
    "answers 0": (lambda snapshot: 0, "approve_if answered a int, neither True nor False"),
}


@pytest.mark.parametrize("rule", list(RULES_THAT_CANNOT_BE_READ))
def test_a_rule_that_cannot_be_read_leaves_the_step_to_a_person_and_is_logged(
        approvers, t0, caplog, rule):
    check, logged = RULES_THAT_CANNOT_BE_READ[rule]
    workflow = _declared_with("test-approval-by-an-unreadable-rule", check)
    try:
        run = new_run("test-approval-by-an-unreadable-rule", amount=5)
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
        assert step(run, "approve").status == StepStatus.WAITING
        assert records(run, "approval_requested").count() == 1
        assert not records(run, "approved_by_rule").exists()
        assert step(run, "pay").attempt == 0
        assert requests.open_pending_requests(now=t0) == 1
        line = next(r for r in caplog.records if logged in r.getMessage())
        assert f"run {run.pk} step approve" in line.getMessage()
        assert (line.exc_info is not None) == (rule == "raises")
    finally:
        definition.registry.unregister(workflow)


def test_an_approval_step_first_in_its_workflow_is_approved_by_its_rule_at_the_claim(script):
    workflow = _declared_with("test-approval-by-rule-first", lambda snapshot: False)
    try:
        run = new_run("test-approval-by-rule-first", amount=5)
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPLETED
        assert step(run, "approve").result == BY_RULE
        assert records(run, "approved_by_rule").count() == 1
        assert not ApprovalRequest.objects.exists()
    finally:
        definition.registry.unregister(workflow)


def test_a_step_a_person_rejected_is_decided_by_a_person_again_once_resumed(
        approvers, ann, t0):
    """The rule could not be read when the run first got there, so a person was asked, and
    rejected it. Resumed, the step is asked of a person again, whatever the rule says now."""
    answers = [ValueError("no threshold configured yet")]

    def rule(snapshot):
        if answers:
            raise answers.pop()
        return False

    workflow = _declared_with("test-approval-rejected-then-ruled", rule)
    try:
        run = new_run("test-approval-rejected-then-ruled", amount=5)
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
        assert requests.open_pending_requests(now=t0) == 1
        request = ApprovalRequest.objects.get(run=run)
        assert decide(request.pk, user=ann, approved=False, comment="not this vendor",
                      decision_id=uuid.uuid4(), now=t0).outcome == "recorded"
        run.refresh_from_db()
        assert run.attention_reason == AttentionReason.APPROVAL_REJECTED

        transitions.resume(run.pk, actor=SYSTEM, reason="ask again")
        assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
        assert step(run, "approve").status == StepStatus.WAITING
        assert not records(run, "approved_by_rule").exists()
        assert requests.open_pending_requests(now=t0) == 1
        assert step(run, "pay").attempt == 0
    finally:
        definition.registry.unregister(workflow)


OLD = Fernet.generate_key().decode()
NEW = Fernet.generate_key().decode()
IBAN = "DE89370400440532013000"


@pytest.fixture
def paying_to_a_sealed_account():
    """The account is sealed by the first step; a check between it and the approval fails
    once, so that the key can leave the ring before the run reaches the approval. Its rule
    would approve anything: only its snapshot stands in the way."""
    workflow = Workflow("test-approval-by-rule-of-a-sealed-account", version=1, input=OrderIn)
    checks = []

    @workflow.read("fetch-account", sensitive=("iban",))
    def fetch_account(ctx):
        return {"holder": "ACME", "iban": IBAN}

    @workflow.read("check", retry=FAST)
    def check(ctx):
        checks.append(ctx.attempt)
        if len(checks) == 1:
            raise TransientError("the vendor register is busy")
        return {"ok": True}

    @workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject",
                       approve_if=lambda snapshot: False)
    def approve(ctx):
        account = ctx.results["fetch-account"]
        return {"holder": account["holder"], "iban": account["iban"],
                "amount": ctx.input.amount}

    @workflow.write("pay", retry=FAST, honours_key=True)
    def pay(ctx):
        return {"ref": ctx.key}

    yield workflow
    definition.registry.unregister(workflow)


def test_a_snapshot_that_cannot_be_made_leaves_the_step_to_a_person_held_for_the_key(
        paying_to_a_sealed_account, approvers, t0, settings, caplog):
    settings.FIELD_ENCRYPTION_KEYS = {"old": OLD}
    run = new_run("test-approval-by-rule-of-a-sealed-account", amount=5)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING  # the check's retry
    assert step(run, "check").status == StepStatus.SCHEDULED

    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW}  # "old" was taken out of the ring
    make_due(run)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING

    assert step(run, "approve").status == StepStatus.WAITING
    assert not records(run, "approved_by_rule").exists()
    assert records(run, "approval_requested").count() == 1
    assert any("approve_if not asked, its snapshot cannot be made" in r.getMessage()
               and IBAN not in r.getMessage() for r in caplog.records)
    # As for any approval step whose snapshot cannot open a sealed value: held for the key.
    assert requests.open_pending_requests(now=t0) == 0
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.SEALED_VALUE_UNREADABLE

    # The key back and the run resumed: a person was asked about it, a person decides.
    settings.FIELD_ENCRYPTION_KEYS = {"new": NEW, "old": OLD}
    transitions.resume(run.pk, actor=SYSTEM, reason="field key old put back")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.WAITING
    assert not records(run, "approved_by_rule").exists()
    assert requests.open_pending_requests(now=t0) == 1
    assert step(run, "pay").attempt == 0
