"""The sandbox's fault "empty_answer" on model.chat: a chat completion with neither text nor
tool calls, whatever the model was asked. Before, only an agent's turn came empty: a
classification or a summary request spent the fault and answered as if none were queued,
so a rehearsal of a model saying nothing never reached the runtime's rule for a
classification (a model format error, asked again within the step's budget, then the run
stops for a person) nor for a summary (the run stops for a person). The demo's workflows
against the sandbox over real HTTP."""

import json

import pytest

from demo.sandbox import faults
from demo.sandbox.models import ModelCall, Task
from runs.agent_models import AgentTurn
from runs.agents import agent_loop
from runs.execution import executor
from runs.machine import transitions
from runs.models import AttentionReason, ErrorClass, RunStatus, Step
from tests.agent_runs import ACTOR, advance, start_summarised

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_empty_classifications_past_the_budget_stop_the_run_as_model_format_errors():
    faults.add("model.chat", faults.EMPTY_ANSWER, times=3)
    run, _ = transitions.start_run(
        workflow="invoice-approval", business_key="tenant-42:INV-1847:empty",
        input={"tenant": "tenant-42", "invoice_number": "INV-1847",
               "approver_email": "approver@example.com"}, actor=ACTOR, wake=False)

    run = advance(run, times=20)

    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    step = Step.objects.get(run=run, name="classify")
    assert step.status == "failed" and step.error_class == ErrorClass.MODEL_FORMAT
    # Asked three times (budget 2), each answer empty; nothing after the classification.
    assert list(ModelCall.objects.values_list("content", flat=True)) == ["", "", ""]
    assert not faults.pending()
    assert Step.objects.get(run=run, name="create-approval-task").status == "pending"
    assert Task.objects.count() == 0


def test_an_empty_answer_to_a_summary_request_stops_the_run_for_a_person(monkeypatch):
    asked = agent_loop.ask_model

    def empty_summary(client, spec, conversation, tools=True):
        if not tools:  # the summary request: the sandbox's next answer is empty
            faults.add("model.chat", faults.EMPTY_ANSWER)
        return asked(client, spec, conversation, tools=tools)

    monkeypatch.setattr(agent_loop, "ask_model", empty_summary)
    run = start_summarised("tenant-42:empty-summary")
    executor.advance_run(run.pk, worker="w1")
    run.refresh_from_db()

    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    step = Step.objects.get(run=run, name="triage")
    assert step.error_class == ErrorClass.MODEL_FORMAT
    assert "summary request with no text" in step.error_message
    assert not faults.pending()
    # The empty answer is the sandbox's last, to the summary request; no summary is stored.
    last = ModelCall.objects.order_by("created_at").last()
    assert json.loads(last.content) == {"content": "", "tool_calls": []}
    assert "Summarise the conversation" in last.prompt
    assert not AgentTurn.objects.filter(step=step).exclude(summarises=0)\
        .exclude(summarises__isnull=True).exists()
