"""Ask the model again is refused once a later step has acted on the stored decision: an
agent step too, whatever its own end. Its tool calls' effects stand even when it failed, and
its stored turns, which read the old decision, would be reused after the new one. Before,
only a later write or notify step counted, so a decision could be changed under an agent
that had acted on it."""

import pytest

from audit.models import AuditRecord
from runs.definitions.definition import StepResult, Workflow
from runs.definitions.registry import registry
from runs.machine.errors import TransitionNotAllowed
from runs.models import RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput, offered
from tests.factories import SYSTEM, new_run, place, step
from tests.workflows import FAST, Category, NoteArgs, OrderIn, scripted_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def decide_then_act():
    """A decision, then an agent whose tool writes a note."""
    workflow = Workflow("test-decide-then-act", version=1, input=OrderIn)

    @workflow.decision("classify", schema=Category, retry=FAST)
    def classify(ctx):
        return scripted_call(ctx, lambda: {"category": "office", "confidence": 0.9})

    agent = workflow.agent("act", system_prompt="Act on the category.")

    @agent.tool("write-note", kind="write", honours_key=True, args=NoteArgs)
    def write_note(ctx, args):
        """Write a note."""
        return StepResult({"note": "N-1"}, remote_ref="N-1")

    yield workflow
    registry.unregister(workflow)


def _steps(run):
    return list(Step.objects.filter(run=run).order_by("position"))


@pytest.mark.parametrize("agent_status", [StepStatus.FAILED, StepStatus.UNKNOWN,
                                          StepStatus.SUCCEEDED])
def test_a_decision_a_later_agent_step_acted_on_is_not_asked_again(decide_then_act,
                                                                   agent_status):
    run = place(new_run("test-decide-then-act"), status=RunStatus.ATTENTION,
                step_statuses={"classify": StepStatus.SUCCEEDED, "act": agent_status})
    records = AuditRecord.objects.filter(run=run).count()

    assert "ask_again" not in {a.name for a in offered(run, _steps(run))}
    with pytest.raises(TransitionNotAllowed, match="act already acted on this decision: "
                                                   "re-run from classify instead"):
        ACTIONS["ask_again"].perform(run.pk, actor=SYSTEM,
                                     given=ActionInput(reason="wrong category", step="classify"))
    assert step(run, "classify").status == StepStatus.SUCCEEDED
    assert AuditRecord.objects.filter(run=run).count() == records


def test_a_decision_no_later_step_acted_on_is_asked_again(decide_then_act):
    run = place(new_run("test-decide-then-act"), status=RunStatus.ATTENTION,
                step_statuses={"classify": StepStatus.SUCCEEDED})
    ACTIONS["ask_again"].perform(run.pk, actor=SYSTEM,
                                 given=ActionInput(reason="wrong category", step="classify"))
    assert step(run, "classify").status == StepStatus.PENDING
    assert AuditRecord.objects.filter(run=run, action="decision_discarded").count() == 1
