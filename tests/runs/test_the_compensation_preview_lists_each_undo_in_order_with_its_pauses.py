"""The preview an operator reads before compensating (runs.operator.previews.
compensation_outline) lists exactly what the compensation then undoes, in the order it undoes
it: an agent step's undo as its tool calls' undos one by one, each pause for a person where
the compensation stops, and the effects that stand and are not undone because they declared
no undo. Each test runs the compensation afterwards and compares."""

import pytest

from audit.chain import Actor
from audit.models import AuditRecord
from demo.sandbox.models import LedgerEntry, Task
from runs.definitions.definition import StepResult, Workflow, registry
from runs.execution import executor
from runs.machine import crashpoints, transitions
from runs.machine.errors import PermanentError
from runs.models import RunStatus, Step, StepStatus, ToolCall
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.previews import compensation_outline
from tests.agent_runs import ACTOR, advance, start_triage
from tests.factories import SYSTEM, new_run, step
from tests.workflows import FAST, OrderIn, scripted_call

SECOND = Actor.system("second")


def steps_of(run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


@pytest.mark.django_db(transaction=True)
def test_an_agents_undos_are_listed_call_by_call_with_the_pause_where_it_stops(live_sandbox):
    run = start_triage(key="tenant-42:outline-agent")
    with crashpoints.failing("tell-requester"):
        run = advance(run)
    post = ToolCall.objects.get(step__run=run, tool="post-ledger")
    task = ToolCall.objects.get(step__run=run, tool="open-approval-task")
    outline = compensation_outline(run, steps_of(run))
    # What the console's, the API's and the command line's Compensate dialog says.
    said = ACTIONS["compensate"].explain(run, steps_of(run))
    assert said[1:1 + len(outline)] == outline
    undos = [line for line in outline if line[:1].isdigit()]
    assert len(undos) == 2
    assert undos[0].startswith(f"1. triage: tool post-ledger (call {post.ref}, ")
    assert "pauses for a person to confirm" in undos[0]
    assert undos[1].startswith(f"2. triage: tool open-approval-task (call {task.ref}, ")
    assert "pauses" not in undos[1]
    # The reads the agent made change nothing: they are neither undone nor "not undone".
    assert not any("read-invoice" in line or "lookup-vendor" in line for line in outline)

    transitions.compensate(run.pk, actor=ACTOR, reason="requester unreachable",
                           approved_by=SECOND)
    run = advance(run)
    # It stops where the preview said, before anything is sent.
    assert run.status == RunStatus.ATTENTION
    assert LedgerEntry.objects.filter(reverses__isnull=False).count() == 0
    assert Task.objects.get().status != Task.CANCELLED
    ACTIONS["confirm_compensation"].perform(
        run.pk, actor=ACTOR, given=ActionInput(reason="reversal checked", step="triage"))
    run = advance(run)
    assert run.status == RunStatus.COMPENSATED
    undone = list(AuditRecord.objects.filter(run=run, action="tool_call_compensated")
                  .order_by("seq").values_list("data__tool_call", flat=True))
    assert undone == [post.ref, task.ref]
    assert LedgerEntry.objects.filter(reverses__isnull=False).count() == 1


def _effect(ctx):
    from tests.workflows import script

    def commit():
        ref = script.effects.setdefault(ctx.key, f"{ctx.step}-ref")
        return StepResult({"ref": ref}, remote_ref=ref)
    return commit


def _undo(ctx):
    from tests.workflows import script

    script.calls.append((f"{ctx.step}:compensate", ctx.key, ctx.attempt))
    action = script.next_action(f"{ctx.step}:compensate")
    if isinstance(action, BaseException):
        raise action
    ref = script.compensations.setdefault(ctx.key, f"undo-{ctx.step}")
    return StepResult({"undone": ctx.remote_ref}, remote_ref=ref)


def _write(workflow: Workflow, name: str, *, undo: bool, impact: str = "low") -> None:
    @workflow.write(name, impact=impact, retry=FAST, honours_key=True)
    def write(ctx):
        return scripted_call(ctx, _effect(ctx))

    if undo:
        write.compensate(_undo)


@pytest.fixture
def registered():
    """test-outline-keeps-one: a write with an undo, one without (it stands after a
    compensation), then a step that fails; test-outline-high: a high-impact write, then one
    that fails."""
    keeps = Workflow("test-outline-keeps-one", version=1, input=OrderIn)
    _write(keeps, "book-room", undo=True)
    _write(keeps, "tell-partner", undo=False)
    _write(keeps, "charge", undo=False)
    high = Workflow("test-outline-high", version=1, input=OrderIn)
    _write(high, "post-entry", undo=True, impact="high")
    _write(high, "charge", undo=False)
    yield
    registry.unregister(keeps)
    registry.unregister(high)


@pytest.mark.django_db
def test_an_effect_that_declares_no_undo_is_named_as_standing_after_it(script, registered):
    script.plan["charge"] = [PermanentError("card declined")]
    run = new_run("test-outline-keeps-one")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    outline = compensation_outline(run, steps_of(run))
    undos = [line for line in outline if line[:1].isdigit()]
    assert len(undos) == 1 and undos[0].startswith("1. book-room (book-room-ref)")
    kept = outline.index("Not undone (no undo declared): they stand after the compensation:")
    assert outline[kept + 1] == "- tell-partner (tell-partner-ref)"

    transitions.compensate(run.pk, actor=SYSTEM, reason="card declined")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    assert [name for name, _, _ in script.calls if name.endswith(":compensate")] == [
        "book-room:compensate"]
    assert step(run, "tell-partner").status == StepStatus.SUCCEEDED


@pytest.mark.django_db
def test_a_failed_high_impact_undo_tried_again_is_shown_without_a_pause(script, registered):
    script.plan["charge"] = [PermanentError("card declined")]
    script.plan["post-entry:compensate"] = [PermanentError("ledger closed for the day")]
    run = new_run("test-outline-high")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    transitions.compensate(run.pk, actor=SYSTEM, reason="wrong vendor", approved_by=SECOND)
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION  # the pause
    transitions.confirm_compensation(run.pk, step_name="post-entry", actor=SYSTEM,
                                     reason="reversal checked")
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATION_FAILED
    outline = compensation_outline(run, steps_of(run))
    (ledger,) = [line for line in outline if line.startswith("1. ")]
    assert ledger.startswith("1. post-entry") and "pauses" not in ledger
    assert "sent again with the same key" in ledger

    transitions.compensate(run.pk, actor=SYSTEM, reason="ledger open again",
                           approved_by=SECOND)
    # As shown: nobody is asked again, the undo goes out with its one key.
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.COMPENSATED
    keys = [k for name, k, _ in script.calls if name == "post-entry:compensate"]
    assert len(keys) == 2 and len(set(keys)) == 1
