"""The sandbox's fault "malformed" on model.chat: the next answer fails its schema, once per
use of the fault. A classification is tested in test_sandbox.py; an agent's turn asks for its
tool calls with arguments that are not JSON. Before, an agent's turn spent the fault and
answered as if none were queued, so a rehearsal of a malformed model answer never reached
the runtime's rule for one: a call whose arguments cannot be read is kept invalid, never
made, the model is told and asked again, and past the agent's schema error budget the run
stops for a person. The demo's triage agent against the sandbox over real HTTP."""

import json

import pytest

from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.models import AgentTurn, AttentionReason, ErrorClass, RunStatus, Step, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def test_a_malformed_answer_is_an_invalid_call_the_model_is_told_of_and_the_run_goes_on():
    faults.add("model.chat", faults.MALFORMED)

    run = advance(start_triage())

    assert run.status == RunStatus.COMPLETED, run.status_message
    (invalid,) = ToolCall.objects.filter(step__run=run, status="invalid")
    assert invalid.tool == "read-invoice" and invalid.turn == 0
    assert invalid.error_class == ErrorClass.MODEL_FORMAT
    assert invalid.error_message == "the arguments are not JSON"
    # Never made: the invoice was read once, by the call asked for again.
    assert invalid.attempt == 0
    assert ToolCall.objects.filter(step__run=run, tool="read-invoice").count() == 2
    assert AuditRecord.objects.filter(run=run, action="tool_call_invalid").count() == 1
    # The model was told, in the conversation it was sent next.
    second = json.loads(ModelCall.objects.order_by("created_at")[1].prompt)
    told = [m for m in second if m.get("role") == "tool"]
    assert len(told) == 1 and "not JSON" in told[0]["content"]
    # One answer malformed, for the one use of the fault.
    assert ModelCall.objects.filter(malformed=True).count() == 1
    assert AgentTurn.objects.filter(step__run=run).count() == 6 == ModelCall.objects.count()
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1
    # The fault used, the next run's answers are as they were.
    calm = advance(start_triage(key="tenant-42:INV-2001:again"))
    assert calm.status == RunStatus.COMPLETED, calm.status_message
    assert not ToolCall.objects.filter(step__run=calm, status="invalid").exists()
    assert AgentTurn.objects.filter(step__run=calm).count() == 5
    assert ModelCall.objects.filter(malformed=True).count() == 1


def test_malformed_answers_past_the_schema_error_budget_stop_the_run_for_a_person():
    faults.add("model.chat", faults.MALFORMED, times=3)

    run = advance(start_triage(), times=20)

    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    assert "3 tool calls had arguments that fail their schema (budget 2)" in \
        run.status_message
    step = Step.objects.get(run=run, name="triage")
    assert step.error_class == ErrorClass.MODEL_FORMAT
    assert ToolCall.objects.filter(step__run=run).exclude(status="invalid").count() == 0
    assert Task.objects.count() == 0 and LedgerEntry.objects.count() == 0
    assert ModelCall.objects.filter(malformed=True).count() == 3

