"""A model that answers the request for a summary of an agent's conversation with no text
(here: blank, with tool calls it was not offered) pauses the run for a person, its answer
kept for diagnosis within the bound of any malformed answer (agent_loop.KEPT_ANSWER_MAX),
as an answer that is no chat completion is kept: megabytes of a misbehaving model are never
written into the step's row. Nothing the model asked for in it is made."""

import json

import pytest

from demo.sandbox.models import LedgerEntry, Task
from runs.agent_models import AgentTurn
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine.transitions.agent_calls import ModelTurn
from runs.models import AttentionReason, ErrorClass, RunStatus, Step
from tests.agent_runs import start_summarised

pytestmark = pytest.mark.django_db(transaction=True)

HUGE = "q" * 3_000_000


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_a_blank_summary_with_megabytes_of_calls_is_kept_cut(monkeypatch):
    asked = []

    def ask_model(client, spec, conversation, tools=True):
        asked.append(tools)
        if not tools:  # the summary request
            return ModelTurn(content="\n", tool_calls=[
                {"id": "s1", "name": "post-ledger", "arguments": HUGE}])
        return ModelTurn(content="", tool_calls=[
            {"id": f"c{len(asked)}", "name": "read-invoice",
             "arguments": json.dumps({"number": "INV-2001"})}])

    monkeypatch.setattr(agent_loop, "ask_model", ask_model)
    run = start_summarised("tenant-42:blank-summary")
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()

    assert run.status == RunStatus.ATTENTION
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    step = Step.objects.get(run=run, name="triage")
    assert step.error_class == ErrorClass.MODEL_FORMAT
    assert "summary request with no text" in step.error_message
    assert asked.count(False) == 1  # the summary asked for once
    kept = json.dumps(step.result["invalid_output"])
    assert "post-ledger" in kept  # what it answered, for diagnosis
    assert len(kept) <= agent_loop.KEPT_ANSWER_MAX + 100
    # No summary turn stored, and nothing it asked for made.
    assert not AgentTurn.objects.filter(step=step, summarises__isnull=False)\
        .exclude(summarises=0).exists()
    assert LedgerEntry.objects.count() == 0 and Task.objects.count() == 0
