"""Ask the model again discards a stored decision. An approval granted after it approved what
the old decision said: it is asked again, about the new one, before any later step acts.
Before, the approval stood as granted, and the step after it acted on a decision no person
had approved."""

import pytest

from approvals import schedule
from approvals.models import ApprovalRequest
from audit.models import AuditRecord
from runs.definitions.definition import StepResult, Workflow
from runs.definitions.registry import registry
from runs.models import RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import SYSTEM, advance_once, new_run, place, step
from tests.workflows import FAST, Category, OrderIn, script, scripted_call

pytestmark = pytest.mark.django_db

paid: list[str] = []


@pytest.fixture
def decide_approve_pay():
    """A decision, an approval of what it said, then a payment."""
    workflow = Workflow("test-decide-approve-pay", version=1, input=OrderIn)

    @workflow.decision("classify", schema=Category, retry=FAST)
    def classify(ctx):
        return scripted_call(ctx, lambda: {"category": "office", "confidence": 0.9})

    @workflow.approval("approve", approvers=("group:approvers",), on_timeout="reject")
    def approve(ctx):
        return {"category": ctx.results["classify"]["category"]}

    @workflow.write("pay", retry=FAST, honours_key=True)
    def pay(ctx):
        paid.append(ctx.key)
        return StepResult({"paid": True}, remote_ref="P-1")

    paid.clear()
    yield workflow
    registry.unregister(workflow)
    script.reset()


def _granted_then_payment_failed():
    return place(new_run("test-decide-approve-pay", wake=False), status=RunStatus.ATTENTION,
                 step_statuses={"classify": StepStatus.SUCCEEDED,
                                "approve": StepStatus.SUCCEEDED, "pay": StepStatus.FAILED})


def test_the_approval_granted_on_the_old_decision_is_pending_again(decide_approve_pay):
    run = _granted_then_payment_failed()

    ACTIONS["ask_again"].perform(run.pk, actor=SYSTEM,
                                 given=ActionInput(reason="wrong category", step="classify"))

    assert step(run, "classify").status == StepStatus.PENDING
    assert step(run, "approve").status == StepStatus.PENDING
    record = AuditRecord.objects.get(run=run, action="decision_discarded")
    assert record.data["run_again"] == ["approve"]


def test_the_run_waits_for_a_person_on_the_new_decision_and_pays_nothing_before(
        decide_approve_pay):
    run = _granted_then_payment_failed()
    ACTIONS["ask_again"].perform(run.pk, actor=SYSTEM,
                                 given=ActionInput(reason="wrong category", step="classify"))
    script.plan["classify"] = [{"category": "travel", "confidence": 0.8}]

    run = advance_once(run)
    schedule.sweep()

    assert run.status == RunStatus.WAITING
    assert step(run, "classify").result["category"] == "travel"
    assert step(run, "approve").status == StepStatus.WAITING
    assert step(run, "pay").status == StepStatus.FAILED
    assert paid == []
    asked = ApprovalRequest.objects.filter(run=run, step_name="approve", status="pending")
    assert asked.count() == 1
