"""A model endpoint is a neighbour that may misbehave: an answer that is no chat completion,
an answer with neither text nor a tool call, a 429, a 5xx, a hang. Each is classified before
anything is retried: a malformed answer is a model format error (kept for diagnosis, the run
paused for a person), never retried as transient nor taken as the agent's final answer; a
transient failure is asked again by the step's policy, the stored turns reused. The demo's
triage agent against the sandbox over real HTTP; nothing any tool does is made by a bad
answer, and the good answers are never asked for twice."""

import json
import time

import pytest

from audit.models import AuditRecord
from demo.sandbox import faults
from demo.sandbox.models import LedgerEntry, ModelCall, Task
from runs.agents import agent_loop
from runs.models import AgentTurn, AttentionReason, ErrorClass, RunStatus, Step, ToolCall
from tests.agent_runs import advance, start_triage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def sandbox(live_sandbox):
    return live_sandbox


def _paused_on_a_malformed_answer(run, words: str):
    """The run stopped for a person on the first model turn, saying why, with the answer kept
    and no turn, tool call or effect made of it."""
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    step = Step.objects.get(run=run, name="triage")
    assert step.status == "failed" and step.error_class == ErrorClass.MODEL_FORMAT
    assert words in step.error_message, step.error_message
    assert step.result and "invalid_output" in step.result
    assert not AgentTurn.objects.filter(step__run=run).exists()
    assert not ToolCall.objects.filter(step__run=run).exists()
    # Asked once: a malformed answer is not retried as if it were a passing glitch.
    assert ModelCall.objects.count() <= 1
    assert step.attempt == 1
    assert AuditRecord.objects.filter(run=run, action="attention").count() == 1
    assert Task.objects.count() == 0 and LedgerEntry.objects.count() == 0


def test_an_answer_that_is_no_chat_completion_pauses_the_run_as_a_model_format_error():
    faults.add("model.chat", faults.NOT_A_COMPLETION)
    run = advance(start_triage())
    _paused_on_a_malformed_answer(run, "no chat completion")
    step = Step.objects.get(run=run, name="triage")
    assert "Service temporarily moved" in str(step.result["invalid_output"])
    # Classified by this runtime, not an exception's own words.
    assert "AttributeError" not in step.error_message


def test_an_answer_with_neither_text_nor_a_tool_call_is_no_final_answer_and_the_model_is_told():
    faults.add("model.chat", faults.EMPTY_ANSWER)
    run = advance(start_triage())
    assert run.status == RunStatus.COMPLETED, run.status_message
    turns = list(AgentTurn.objects.filter(step__run=run).order_by("index"))
    # The empty answer is stored once, as evidence; the five answers of the script follow.
    assert len(turns) == 6 and ModelCall.objects.count() == 6
    assert turns[0].content == "" and turns[0].tool_calls == []
    step = Step.objects.get(run=run, name="triage")
    assert "LE-" in step.result["answer"]
    asked_next = json.loads(ModelCall.objects.order_by("created_at")[1].prompt)
    assert asked_next[-1] == {"role": "user", "content": agent_loop.SAID_NOTHING}
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1


def test_a_model_that_keeps_saying_nothing_pauses_the_run_past_the_schema_error_budget():
    faults.add("model.chat", faults.EMPTY_ANSWER, times=5)
    run = advance(start_triage(), times=20)
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.MODEL_OUTPUT_PAUSED
    step = Step.objects.get(run=run, name="triage")
    assert step.status == "failed" and step.error_class == ErrorClass.MODEL_FORMAT
    assert "3 times with neither text nor a tool call (budget 2)" in step.error_message
    # Budget 2: asked three times, each answer stored once, none taken as the result.
    assert AgentTurn.objects.filter(step__run=run).count() == 3 == ModelCall.objects.count()
    assert step.attempt == 1
    assert not ToolCall.objects.filter(step__run=run).exists()
    assert AuditRecord.objects.filter(run=run, action="attention").count() == 1
    faults.clear()


@pytest.mark.parametrize("kind", [faults.RATE_LIMIT, faults.UNAVAILABLE, faults.SLOW])
def test_a_transient_model_failure_is_asked_again_and_the_run_completes(kind, settings):
    # The attempts are counted: a good answer slower than the client's timeout on a loaded
    # host (1 s in the tests) would be one more transient failure, asked again. Only a held
    # answer needs a timeout shorter than the hold (SANDBOX_HOLD_SECONDS, 3 s).
    settings.EXTERNAL_TIMEOUT_SECONDS = 2 if kind == faults.SLOW else 30
    # The first read-invoice turn stored, then the model fails on the next turn twice.
    run = start_triage()
    faults.add("model.chat", kind, times=2)
    run = advance(run, times=20)
    assert run.status == RunStatus.COMPLETED, run.status_message
    step = Step.objects.get(run=run, name="triage")
    assert step.attempt == 3
    # Every tool ran once; the two failed requests stored no turn.
    made = ToolCall.objects.filter(step__run=run)
    assert made.count() == 4 and all(c.attempt == 1 for c in made)
    assert AgentTurn.objects.filter(step__run=run).count() == 5
    assert Task.objects.count() == 1 and LedgerEntry.objects.count() == 1
    if kind == faults.SLOW:
        # The sandbox answers a held request after the client gave up on it: let it land
        # here, not in the next test's database.
        time.sleep(settings.SANDBOX_HOLD_SECONDS)


def test_a_model_refusing_for_good_stops_the_run_at_once_without_spending_retries():
    faults.add("model.chat", faults.FORBIDDEN)
    run = advance(start_triage())
    assert run.status == RunStatus.ATTENTION, run.status_message
    assert run.attention_reason == AttentionReason.PERMANENT_ERROR
    step = Step.objects.get(run=run, name="triage")
    assert step.error_class == ErrorClass.PERMANENT and step.attempt == 1
    assert "HTTP 403" in step.error_message
    assert ModelCall.objects.count() == 0 and not ToolCall.objects.filter(step__run=run).exists()
