"""An agent step's result (the model's final answer, with its counts) is kept by the one
rule of every step's result (runs.machine.artifacts.kept_result): apart as an artifact above
RUNS_RESULT_INLINE_BYTES, read whole by the steps after it, and refused above
RUNS_RESULT_MAX_BYTES, the run stopped for a person naming size and limit. A model is a
neighbour that may answer megabytes: its answer is never written inline into the step's row,
and the stored turn is not asked for again."""

import json

import pytest

from runs.agent_models import AgentTurn
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import artifacts, transitions
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, RunStatus, Step
from tests.agent_runs import ACTOR

pytestmark = pytest.mark.django_db


def _answered(monkeypatch, content: str):
    """A test-agent run whose model answers `content` at once, advanced; (run, its step,
    how many times the model was asked)."""
    asked = []

    def ask_model(client, spec, conversation, **kw):
        asked.append(conversation)
        return ModelTurn(content=content, tool_calls=[])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run, _ = transitions.start_run(workflow="test-agent", business_key="long-answer",
                                   input={"order": "o-1"}, actor=ACTOR, wake=False)
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()
    return run, Step.objects.get(run=run, name="assist"), len(asked)


def test_an_answer_over_the_inline_limit_is_kept_apart_and_read_whole(monkeypatch, settings):
    settings.RUNS_RESULT_INLINE_BYTES = 1000
    answer = "a long answer " * 200  # 2,800 characters
    run, step, asked = _answered(monkeypatch, answer)
    assert run.status == RunStatus.COMPLETED, run.status_message
    assert artifacts.is_artifact(step.result)
    assert len(json.dumps(step.result)) < 1000
    # A later step reads it whole, as it reads any result kept apart.
    assert artifacts.Results({"assist": step.result})["assist"]["answer"] == answer
    assert asked == 1


def test_an_answer_over_the_limit_stops_the_run_naming_size_and_limit(monkeypatch, settings):
    settings.RUNS_RESULT_MAX_BYTES = 50_000
    run, step, asked = _answered(monkeypatch, "z" * 60_000)
    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    assert step.status == "failed" and step.error_class == ErrorClass.PERMANENT
    assert "RUNS_RESULT_MAX_BYTES" in step.error_message
    assert "50,000" in step.error_message
    # Nothing of it in the step's row; the answer stays on its stored turn, asked for once.
    assert "z" * 1000 not in json.dumps(step.result)
    assert asked == 1 == AgentTurn.objects.filter(step=step).count()
