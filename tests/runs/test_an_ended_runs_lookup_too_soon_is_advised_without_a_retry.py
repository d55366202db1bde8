"""A run a person ended while an effect's outcome was unknown, at a receiver that ignores
keys: a lookup that finds nothing too soon proves nothing yet, and the advice said "a retry
before then could do it twice", though an ended run offers no retry (settling never sends
it on). Now the advice for an ended run says when to look again, or to record by hand what
the remote system shows, with evidence, and names no retry."""

import pytest

from audit.chain import Actor
from runs.agent_models import ToolCall
from runs.agents import agent_loop
from runs.definitions import definition
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import Classified, UnknownOutcome
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, Run, RunStatus, Step, StepStatus
from runs.operator.actions import ACTIONS, ActionInput
from runs.operator.guidance import recommend
from runs.operator.reconciliation import reconcile_tool_call_by_key
from tests.factories import new_run, step
from tests.workflows import write_note

pytestmark = pytest.mark.django_db
OLGA = Actor(kind="user", label="olga")
IVAN = Actor(kind="user", label="ivan")


def _steps(run: Run) -> list[Step]:
    return list(Step.objects.filter(run=run).order_by("position"))


def _says_no_retry(why: str) -> None:
    assert "again after" in why
    assert "record by hand what the remote system shows, with evidence" in why
    assert "retry" not in why.lower()


def test_an_ended_runs_step_not_found_too_soon_is_advised_without_a_retry(script):
    script.plan["post-ledger"] = [UnknownOutcome("timed out after sending")]
    run = new_run()
    assert executor.advance_run(run.pk, worker="w1") == RunStatus.ATTENTION
    transitions.terminate(run.pk, actor=OLGA, reason="order withdrawn", approved_by=IVAN)
    ACTIONS["reconcile"].perform(run.pk, actor=OLGA, given=ActionInput(
        reason="look the posting up by its key", step="post-ledger", mode="ask"))

    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.ENDED_UNSETTLED
    posting = step(run, "post-ledger")
    assert posting.status == StepStatus.UNKNOWN and posting.next_attempt_at is not None
    advice = recommend(run, _steps(run))
    assert (advice.meant, advice.step) == ("reconcile", "post-ledger")
    _says_no_retry(advice.why)


def test_an_ended_runs_tool_call_not_found_too_soon_is_advised_without_a_retry(
        script, monkeypatch):
    turns = [ModelTurn(content="", tool_calls=[{"id": "c0", "name": "write-note",
                                                "arguments": '{"text": "a"}'}])]
    monkeypatch.setattr(agent_loop, "ask_model", lambda *a, **k: turns.pop(0) if turns
                        else ModelTurn(content="done", tool_calls=[]))
    monkeypatch.setattr(agent_loop, "call_tool", lambda tool, ctx, args: transitions.Outcome(
        succeeded=False, error=Classified(ErrorClass.UNKNOWN, "timed out after sending")))
    # A note at a receiver that ignores keys, whose lookup cannot tell at first (a person
    # is asked), then finds nothing.
    answers = [definition.Undetermined("the notes service is reindexing")]
    monkeypatch.setattr(write_note, "honours_key", False)
    monkeypatch.setattr(write_note, "reconcile_fn", lambda ctx, args: answers.pop(0) if answers
                        else definition.NotFound())
    run, _ = transitions.start_run(workflow="test-agent", business_key="slow-note",
                                   input={"order": "o-1"}, actor=OLGA, wake=False)
    executor.advance_run(run.pk, worker="w1")
    call = ToolCall.objects.get(step__run_id=run.pk)
    assert call.status == "unknown", Run.objects.get(pk=run.pk).status_message
    transitions.terminate(run.pk, actor=OLGA, reason="order withdrawn")

    reconcile_tool_call_by_key(run.pk, step_name="assist", call_ref=call.ref, actor=OLGA,
                               reason="look the note up")
    call.refresh_from_db()
    run = Run.objects.get(pk=run.pk)
    assert run.attention_reason == AttentionReason.ENDED_UNSETTLED
    assert call.status == "unknown" and call.next_attempt_at is not None
    advice = recommend(run, _steps(run))
    assert advice.action.name == "reconcile_tool_call"
    _says_no_retry(advice.why)
