"""A person cancels a pending tool call while another call of the same turn waits out its
backoff (a 429 with Retry-After): the run keeps waiting until that call is due, and the
call is sent at its time, not at once because the cancel let the run go on."""

import pytest

from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.machine.errors import TransientError
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import Run, RunStatus, Step, StepStatus, ToolCall
from tests.agent_runs import ACTOR
from tests.factories import make_due
from tests.workflows import assist

pytestmark = pytest.mark.django_db

RETRY_AFTER = 600.0  # ten minutes: far past anything the test could reach by chance


def _note(call_id, text):
    return {"id": call_id, "name": "write-note", "arguments": f'{{"text": "{text}"}}'}


@pytest.fixture
def a_turn_of_two_calls_the_first_rate_limited(script, monkeypatch):
    script.reset()
    answers = [ModelTurn(content="", tool_calls=[_note("call_a", "a"), _note("call_b", "b")])]
    monkeypatch.setattr(agent_loop, "ask_model", lambda client, spec, conversation, **kw:
                        answers.pop(0) if answers else ModelTurn(content="done",
                                                                 tool_calls=[]))
    tool = assist.tools["write-note"]
    write = tool.fn
    limited = []

    def rate_limited_once(ctx, args):
        if not limited:
            limited.append(ctx.key)
            raise TransientError("429 Too Many Requests", retry_after=RETRY_AFTER)
        return write(ctx, args)

    monkeypatch.setattr(tool, "fn", rate_limited_once)
    return script


def test_the_run_keeps_waiting_for_the_backed_off_call_after_the_other_is_cancelled(
        a_turn_of_two_calls_the_first_rate_limited):
    script = a_turn_of_two_calls_the_first_rate_limited
    run, _ = transitions.start_run(workflow="test-agent", business_key="backoff-then-cancel",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    backed_off, pending = ToolCall.objects.filter(step__run=run, turn=0).order_by("index")
    assert (backed_off.status, pending.status) == ("scheduled", "pending")
    assert run.status == RunStatus.WAITING
    due_at = run.next_wake_at
    assert due_at is not None and due_at == backed_off.next_attempt_at

    transitions.cancel_tool_call(run.pk, step_name="assist", call_ref=pending.ref,
                                 actor=ACTOR, reason="not this note")

    run.refresh_from_db()
    assert run.status == RunStatus.WAITING and run.next_wake_at == due_at
    step = Step.objects.get(run=run, name="assist")
    assert step.status == StepStatus.SCHEDULED and step.next_attempt_at == due_at
    # A worker that comes by before the call is due sends nothing.
    executor.advance_run(run.pk, worker="w2")
    assert [name for name, *_ in script.calls if name == "write-note"] == []
    assert ToolCall.objects.get(pk=backed_off.pk).attempt == 1

    # At its time, the call is sent once, and the cancelled one never.
    make_due(Run.objects.get(pk=run.pk))
    executor.advance_run(run.pk, worker="w2")
    assert [key for name, key, _ in script.calls if name == "write-note"] == [
        backed_off.idempotency_key]
    assert ToolCall.objects.get(pk=backed_off.pk).status == "succeeded"
    assert ToolCall.objects.get(pk=pending.pk).status == "cancelled"
