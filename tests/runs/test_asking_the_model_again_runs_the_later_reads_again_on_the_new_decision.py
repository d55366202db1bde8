"""Ask the model again discards a stored decision; the reads and decisions after it that
already ran did so on the old decision, so they run again after the new one. Before, the run
went on at the first unfinished step with their old results, and a write then acted on a
lookup made for a category the model no longer gave."""

import pytest

from audit.models import AuditRecord
from runs.definitions.definition import Workflow
from runs.definitions.registry import registry
from runs.execution import executor
from runs.machine.errors import PermanentError
from runs.models import Run, RunStatus, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from tests.factories import SYSTEM, new_run, step
from tests.workflows import FAST, Category, OrderIn, scripted_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def decide_look_up_then_book():
    """A decision, a read that uses it, then a write that books what the read found."""
    workflow = Workflow("test-decide-look-up-book", version=1, input=OrderIn)

    @workflow.decision("classify", schema=Category, retry=FAST)
    def classify(ctx):
        return scripted_call(ctx, lambda: {"category": "office", "confidence": 0.9})

    @workflow.read("cost-centre", retry=FAST)
    def cost_centre(ctx):
        return scripted_call(ctx, lambda: {
            "centre": f"CC-{ctx.results['classify']['category']}"})

    @workflow.write("book", retry=FAST, honours_key=True)
    def book(ctx):
        return scripted_call(ctx, lambda: {"booked_to": ctx.results["cost-centre"]["centre"]})

    yield workflow
    registry.unregister(workflow)


def test_the_read_after_the_decision_runs_again_and_the_write_uses_its_new_result(
        script, decide_look_up_then_book):
    script.plan["book"] = [PermanentError("400 the ledger refused the cost centre")]
    run = new_run("test-decide-look-up-book")
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    assert run.status == RunStatus.ATTENTION
    assert step(run, "cost-centre").result == {"centre": "CC-office"}

    script.plan["classify"] = [{"category": "travel", "confidence": 0.8}]
    ACTIONS["ask_again"].perform(run.pk, actor=SYSTEM, given=ActionInput(
        reason="it was a train ticket", step="classify"))
    assert step(run, "classify").status == StepStatus.PENDING
    assert step(run, "cost-centre").status == StepStatus.PENDING
    assert step(run, "cost-centre").result is None
    record = AuditRecord.objects.get(run=run, action="decision_discarded")
    assert record.data["run_again"] == ["cost-centre"]

    executor.advance_run(run.pk, worker="w1")
    run = Run.objects.get(pk=run.pk)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert step(run, "cost-centre").result == {"centre": "CC-travel"}
    assert step(run, "book").result == {"booked_to": "CC-travel"}
    assert [name for name, *_ in script.calls].count("cost-centre") == 2
